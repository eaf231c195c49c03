package h2guard

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"
)

// chunkConn is a server's connection whose client sent data, read in
// chunks of at most size bytes; what the server writes is kept in out.
type chunkConn struct {
	net.Conn // nil: only the methods defined below are called
	data     []byte
	size     int
	out      bytes.Buffer
}

func (c *chunkConn) Read(b []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := copy(b[:min(len(b), c.size)], c.data)
	c.data = c.data[n:]
	return n, nil
}
func (c *chunkConn) Write(b []byte) (int, error)      { return c.out.Write(b) }
func (c *chunkConn) Close() error                     { return nil }
func (c *chunkConn) CloseWrite() error                { return nil }
func (c *chunkConn) SetDeadline(time.Time) error      { return nil }
func (c *chunkConn) SetReadDeadline(time.Time) error  { return nil }
func (c *chunkConn) SetWriteDeadline(time.Time) error { return nil }
func (c *chunkConn) RemoteAddr() net.Addr             { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }

// readAll reads c until an error, with buf, as a server does.
func readAll(c net.Conn, buf []byte) ([]byte, error) {
	var got []byte
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return got, err
		}
	}
}

// FuzzH2Guard feeds arbitrary client bytes, in chunks of any size,
// through a guarded connection: the server must read every byte
// unchanged (a guard whose budget is never exceeded), or a prefix of
// them and then ErrTooManyResets with a GOAWAY written (a budget of one
// reset); the frame follower must count the same whatever the chunks,
// never panic and never allocate. The seed corpus
// (testdata/fuzz/FuzzH2Guard) holds a call and cancels, a flood, HTTP/1.1,
// a truncated preface, the largest frame length and stream ids with the
// reserved bit.
func FuzzH2Guard(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16) {
		size := int(chunk%4096) + 1

		// Counting: the same in one piece and in chunks, with no allocation.
		// Every byte arrives at one instant, so every reset of a stream
		// the ages remember is premature, in one piece or in chunks.
		whole := newInbound()
		whole.ages = &streamAges{}
		wo, wr, wp := whole.feed(data)
		parts := newInbound()
		var po, pr, pp int
		var ages streamAges
		allocs := testing.AllocsPerRun(1, func() {
			parts = newInbound()
			ages = streamAges{}
			parts.ages = &ages
			po, pr, pp = 0, 0, 0
			for b := data; len(b) > 0; {
				n := min(size, len(b))
				o, r, p := parts.feed(b[:n])
				po, pr, pp = po+o, pr+r, pp+p
				b = b[n:]
			}
		})
		if allocs != 0 {
			t.Fatalf("feeding %d bytes allocated %v times", len(data), allocs)
		}
		// Where a stream that is not HTTP/2 was given up on differs with
		// the chunks; what was counted does not.
		for i := range ages.slots {
			w, p := &whole.ages.slots[i], &ages.slots[i]
			if !whole.off && (w.id != p.id || w.at != p.at) {
				t.Fatalf("in one piece stream age slot %d holds stream %d at %d; in chunks of %d, %d at %d", i, w.id, w.at, size, p.id, p.at)
			}
		}
		whole.ages, parts.ages = nil, nil
		if wo != po || wr != pr || wp != pp || whole.off != parts.off || (!whole.off && whole != parts) {
			t.Fatalf("in one piece: opened %d, resets %d (%d premature), %+v; in chunks of %d: %d, %d (%d), %+v", wo, wr, wp, whole, size, po, pr, pp, parts)
		}

		// Pass-through: every byte, unchanged.
		g := New(Options{Burst: 1 << 30, Rate: 1 << 30, Logger: discard()})
		got, err := readAll(g.Wrap(&chunkConn{data: data, size: size}), make([]byte, size+7))
		if !errors.Is(err, io.EOF) || !bytes.Equal(got, data) {
			t.Fatalf("a guard within budget: read %d bytes (equal %v), err %v; want all %d unchanged, EOF", len(got), bytes.Equal(got, data), err, len(data))
		}

		// Over budget: a prefix, then ErrTooManyResets and a GOAWAY.
		if len(data) > lingerBytes {
			return // the lingering close would wait out lingerTime
		}
		cc := &chunkConn{data: data, size: size}
		g = New(Options{Burst: 1, Rate: 1e-9, Logger: discard()})
		got, err = readAll(g.Wrap(cc), make([]byte, size+7))
		if !bytes.HasPrefix(data, got) {
			t.Fatalf("a guard over budget passed bytes that are not the client's")
		}
		switch {
		case wr >= 2 && !errors.Is(err, ErrTooManyResets):
			t.Fatalf("%d resets against a budget of one: err %v, want ErrTooManyResets", wr, err)
		case wr < 2 && !errors.Is(err, io.EOF):
			t.Fatalf("%d resets against a budget of one: err %v, want EOF", wr, err)
		}
		if errors.Is(err, ErrTooManyResets) {
			// The GOAWAY names the last stream opened up to the end of the
			// read that tripped the budget, which the server never saw.
			upTo := newInbound()
			upTo.feed(data[:min(len(data), len(got)+size)])
			if want := goAwayFrame(upTo.last, goAwayDebug); !bytes.Equal(cc.out.Bytes(), want) {
				t.Fatalf("closed over budget, but wrote %x, want the GOAWAY %x", cc.out.Bytes(), want)
			}
		}
	})
}

// discard is a logger that drops everything.
func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
