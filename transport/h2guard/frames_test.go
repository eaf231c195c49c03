package h2guard

import (
	"bytes"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// clientBytes is a client's side of a connection as a Framer writes it:
// the preface, SETTINGS, a call on stream 1 (HEADERS split by a
// CONTINUATION, DATA, trailers), stream 3 opened and reset, a 70 KB DATA
// frame on stream 5 whose payload looks like frame headers, PING, and
// stream 5 reset: 3 streams opened, 2 resets, last stream 5.
func clientBytes(t testing.TB) []byte {
	var b bytes.Buffer
	b.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&b, nil)
	fr.SetMaxReadFrameSize(1 << 20)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":path", Value: "/x"}, {Name: ":scheme", Value: "https"}, {Name: ":authority", Value: "a"}} {
		_ = enc.WriteField(f)
	}
	block := hb.Bytes()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}))
	must(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:2]}))
	must(fr.WriteContinuation(1, true, block[2:]))
	must(fr.WriteData(1, false, []byte("hello")))
	must(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndHeaders: true, EndStream: true}))
	must(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block, EndHeaders: true}))
	must(fr.WriteRSTStream(3, http2.ErrCodeCancel))
	must(fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: block, EndHeaders: true}))
	// A payload of fake RST_STREAM frame headers must be skipped, not read.
	fake := bytes.Repeat([]byte{0, 0, 4, frameRSTStream, 0, 0, 0, 0, 7, 0, 0, 0, 8}, 70<<10/13)
	must(fr.WriteData(5, false, fake))
	must(fr.WritePing(false, [8]byte{1}))
	must(fr.WriteRSTStream(5, http2.ErrCodeCancel))
	return b.Bytes()
}

func TestFramesCountOpenedStreamsAndResetsWhateverTheChunks(t *testing.T) {
	data := clientBytes(t)
	for _, size := range []int{1, 2, 3, 7, 9, 13, 24, 25, 100, 4096, len(data)} {
		f := newInbound()
		var opened, resets int
		for b := data; len(b) > 0; {
			n := min(size, len(b))
			o, r, _ := f.feed(b[:n])
			opened, resets = opened+o, resets+r
			b = b[n:]
		}
		if opened != 3 || resets != 2 || f.last != 5 || f.off || !f.atBoundary() {
			t.Errorf("in chunks of %d: opened %d, resets %d, last stream %d, off %v, at a boundary %v; want 3, 2, 5, false, true",
				size, opened, resets, f.last, f.off, f.atBoundary())
		}
	}
}

func TestFramesStopFollowingBytesThatAreNotHTTP2(t *testing.T) {
	data := append([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), clientBytes(t)[len(clientPreface):]...)
	f := newInbound()
	if o, r, _ := f.feed(data); o != 0 || r != 0 || !f.off {
		t.Errorf("HTTP/1.1 then frames: opened %d, resets %d, off %v; want 0, 0, true", o, r, f.off)
	}
	// A preface wrong only in its last byte, given byte by byte.
	f = newInbound()
	bad := []byte(clientPreface)
	bad[len(bad)-1] = 'x'
	for i := range bad {
		f.feed(bad[i : i+1])
	}
	if !f.off {
		t.Error("a preface wrong in its last byte is followed")
	}
}

// TestFramesUntilFindsTheEndOfTheFrameInProgress checks until, which
// says where a GOAWAY may go in what a server writes, at every offset
// of a stream of frames against the boundaries a whole parse finds.
func TestFramesUntilFindsTheEndOfTheFrameInProgress(t *testing.T) {
	data := clientBytes(t)[len(clientPreface):] // frames only, as a server writes
	var bounds []int                            // offsets where a frame starts, and the end
	for off := 0; off < len(data); {
		bounds = append(bounds, off)
		off += frameHeaderLen + int(payloadLen((*[9]byte)(data[off:off+9])))
	}
	bounds = append(bounds, len(data))
	next := func(off int) int { // the first boundary at or after off
		for _, b := range bounds {
			if b >= off {
				return b
			}
		}
		return -1
	}
	for _, step := range []int{1, 5, 9, 11, 100, 3000} {
		f := frames{}
		for off := 0; off < len(data); off += step {
			for _, tail := range []int{0, 1, 8, 9, 10, 64 << 10, len(data)} {
				chunk := data[off:min(len(data), off+tail)]
				want := next(off) - off
				if want > len(chunk) {
					want = -1
				}
				if got := f.until(chunk); got != want {
					t.Fatalf("step %d, offset %d, %d bytes ahead: until = %d, want %d", step, off, len(chunk), got, want)
				}
			}
			if got, want := f.atBoundary(), next(off) == off; got != want {
				t.Fatalf("step %d, offset %d: atBoundary = %v, want %v", step, off, got, want)
			}
			f.feed(data[off:min(len(data), off+step)])
		}
	}
}

func TestGoAwayFrameParsesAsEnhanceYourCalm(t *testing.T) {
	fr := http2.NewFramer(nil, bytes.NewReader(goAwayFrame(1<<31-1, goAwayDebug)))
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	ga, ok := f.(*http2.GoAwayFrame)
	if !ok || ga.ErrCode != http2.ErrCodeEnhanceYourCalm || ga.LastStreamID != 1<<31-1 || string(ga.DebugData()) != goAwayDebug {
		t.Fatalf("read %v", f)
	}
}

// TestBudgetTripsOnAFloodOnly: a flood trips the budget, cancelling at
// the rate or in a burst up to it does not, and the edges are exact.
func TestBudgetTripsOnAFloodOnly(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		name      string
		burst     float64
		rate      float64
		resets    int           // resets, one per take
		every     time.Duration // between takes
		perTake   int           // resets per take (0: 1)
		tripAfter int           // the take that trips, counting from 1; 0: none
	}{
		{name: "a flood without pause", burst: 100, rate: 50, resets: 1000, every: 0, tripAfter: 101},
		{name: "a flood at 20 times the rate", burst: 100, rate: 50, resets: 1000, every: time.Millisecond, tripAfter: 106},
		{name: "the burst exactly, at once", burst: 100, rate: 50, resets: 100, every: 0},
		{name: "one over the burst, at once", burst: 100, rate: 50, resets: 101, every: 0, tripAfter: 101},
		{name: "the burst at once in one read", burst: 100, rate: 50, resets: 1, perTake: 100},
		{name: "one over the burst in one read", burst: 100, rate: 50, resets: 1, perTake: 101, tripAfter: 1},
		{name: "every call cancelled at the rate", burst: 100, rate: 50, resets: 5000, every: 20 * time.Millisecond},
		{name: "two thirds over the rate", burst: 100, rate: 50, resets: 20000, every: 12 * time.Millisecond, tripAfter: 249},
		{name: "now and then", burst: 100, rate: 50, resets: 100, every: time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := budget{burst: c.burst, rate: c.rate}
			per := max(c.perTake, 1)
			now := t0
			tripped := 0
			for i := 1; i <= c.resets; i++ {
				if !b.take(per, now) {
					tripped = i
					break
				}
				now = now.Add(c.every)
			}
			if tripped != c.tripAfter {
				t.Errorf("tripped at take %d, want %d (0: never)", tripped, c.tripAfter)
			}
		})
	}
}
