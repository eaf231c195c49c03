package h2guard

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2"
)

// BenchmarkGuardedRead measures what the guard adds to a server's read of
// a client's calls: one read of a chunk holding a gRPC call's frames
// (HEADERS, DATA of 300 bytes), through the wrapper and, for comparison,
// straight from the connection.
func BenchmarkGuardedRead(b *testing.B) {
	var call bytes.Buffer
	fr := http2.NewFramer(&call, nil)
	var one bytes.Buffer
	one.WriteString(http2.ClientPreface)
	for id := uint32(1); id < 2*1024; id += 2 {
		call.Reset()
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: bytes.Repeat([]byte{0x82}, 40), EndHeaders: true})
		_ = fr.WriteData(id, true, make([]byte, 300))
		one.Write(call.Bytes())
	}
	data := one.Bytes()
	chunk := len(call.Bytes())
	buf := make([]byte, 32<<10)
	for _, guarded := range []bool{false, true} {
		name := "plain"
		if guarded {
			name = "guarded"
		}
		b.Run(name, func(b *testing.B) {
			g := New(Options{Logger: discard()})
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				c := &chunkConn{data: data, size: chunk}
				var r interface{ Read([]byte) (int, error) } = c
				if guarded {
					r = g.Wrap(c)
				}
				for {
					if _, err := r.Read(buf); err != nil {
						break
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(data)/chunk), "ns/call")
		})
	}
}
