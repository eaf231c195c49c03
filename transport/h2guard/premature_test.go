package h2guard

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// streamPairs is a client's bytes: the preface, then n streams, each
// opened (HEADERS) and reset (RST_STREAM), one stream per pairBytes.
func streamPairs(t *testing.T, n int) (data []byte, pairBytes int) {
	t.Helper()
	var b bytes.Buffer
	b.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&b, nil)
	for i := range n {
		id := uint32(2*i + 1)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte{0x82}, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		if err := fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes(), (b.Len() - len(http2.ClientPreface)) / n
}

// stepClock is a clock that moves by step each time it is read.
func stepClock(step time.Duration) func() time.Time {
	now := time.Unix(1e9, 0)
	return func() time.Time {
		now = now.Add(step)
		return now
	}
}

// TestPrematureResetsCloseAFloodAfterPrematureMinStreams: with a reset
// budget the flood never empties, a client that resets every stream it
// opens, younger than a millisecond and unanswered, is closed at its
// PrematureMin-th reset, whatever the chunks its bytes come in; one that
// resets each stream after 2 ms, or only every third stream at once,
// keeps its connection.
func TestPrematureResetsCloseAFloodAfterPrematureMinStreams(t *testing.T) {
	const streams = 3 * PrematureMin
	data, pair := streamPairs(t, streams)
	for _, tc := range []struct {
		name string
		// data is what the client sends, chunk bytes per Read; step is
		// how far the clock moves between two Reads.
		data  []byte
		chunk int
		step  time.Duration
		// closedAt is the stream whose reset closes the connection (0:
		// never closed).
		closedAt int
	}{
		{name: "a stream per read, 10µs apart", data: data, chunk: pair, step: 10 * time.Microsecond, closedAt: PrematureMin},
		{name: "half a stream per read", data: data, chunk: pair / 2, step: time.Microsecond, closedAt: PrematureMin},
		{name: "everything in one read", data: data, chunk: len(data), step: time.Microsecond, closedAt: streams},
		{name: "each reset 2ms after its stream opened", data: data, chunk: pair / 2, step: 2 * time.Millisecond},
		{name: "every third stream reset at once", data: everyThirdReset(t, streams), chunk: pair, step: 10 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New(Options{Burst: 1 << 30, Rate: 1 << 30, Logger: discard(), Now: stepClock(tc.step)})
			c := &chunkConn{data: tc.data, size: tc.chunk}
			gc := g.Wrap(c).(*conn)
			got, err := readAll(gc, make([]byte, 64<<10))
			if tc.closedAt == 0 {
				if !errors.Is(err, io.EOF) || gc.premature >= PrematureMin && 2*gc.premature > gc.opened {
					t.Fatalf("read %d of %d bytes, err %v; %d opened, %d premature: want all, EOF", len(got), len(tc.data), err, gc.opened, gc.premature)
				}
				return
			}
			if !errors.Is(err, ErrTooManyResets) {
				t.Fatalf("read %d of %d bytes, err %v; want ErrTooManyResets", len(got), len(tc.data), err)
			}
			if gc.opened != int64(tc.closedAt) || gc.premature != int64(tc.closedAt) {
				t.Errorf("closed at %d opened, %d premature; want %d", gc.opened, gc.premature, tc.closedAt)
			}
			// The server read none of the Read that went over.
			if max := len(http2.ClientPreface) + (tc.closedAt-1)*pair + pair; len(got) >= max {
				t.Errorf("the server read %d bytes, want fewer than %d", len(got), max)
			}
			if !bytes.Contains(c.out.Bytes(), goAwayFrame(uint32(2*tc.closedAt-1), goAwayDebug)) {
				t.Errorf("no GOAWAY naming stream %d written: %x", 2*tc.closedAt-1, c.out.Bytes())
			}
		})
	}
}

// everyThirdReset is n streams of which every third is reset at once.
func everyThirdReset(t *testing.T, n int) []byte {
	var b bytes.Buffer
	b.WriteString(http2.ClientPreface)
	fr := http2.NewFramer(&b, nil)
	for i := range n {
		id := uint32(2*i + 1)
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte{0x82}, EndHeaders: true, EndStream: true}); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 {
			if err := fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
				t.Fatal(err)
			}
		}
	}
	return b.Bytes()
}

// TestAnsweredStreamsResetAtOnceAreNotPremature: a stream the server
// answered (sent HEADERS on) before the client reset it, as a client that
// reads the first message of a server stream and cancels it does, is no
// premature reset however young.
func TestAnsweredStreamsResetAtOnceAreNotPremature(t *testing.T) {
	g := New(Options{Burst: 1 << 30, Rate: 1 << 30, Logger: discard(), Now: stepClock(time.Microsecond)})
	var client bytes.Buffer
	client.WriteString(http2.ClientPreface)
	cfr := http2.NewFramer(&client, nil)
	c := &chunkConn{size: 1 << 20}
	gc := g.Wrap(c).(*conn)
	sfr := http2.NewFramer(gc, nil) // the server's answers go through the guard
	buf := make([]byte, 1<<20)
	for i := range 3 * PrematureMin {
		id := uint32(2*i + 1)
		client.Reset()
		if i == 0 {
			client.WriteString(http2.ClientPreface)
		}
		if err := cfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte{0x82}, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		c.data = client.Bytes()
		if _, err := gc.Read(buf); err != nil {
			t.Fatalf("stream %d: %v", id, err)
		}
		if err := sfr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: []byte{0x88}, EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		client.Reset()
		if err := cfr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			t.Fatal(err)
		}
		c.data = client.Bytes()
		if _, err := gc.Read(buf); err != nil {
			t.Fatalf("stream %d's reset: %v", id, err)
		}
	}
	if gc.premature != 0 || gc.resets != 3*PrematureMin {
		t.Errorf("%d resets, %d premature; want %d, 0", gc.resets, gc.premature, 3*PrematureMin)
	}
}
