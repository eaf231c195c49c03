package h2guard

import (
	"sync/atomic"
	"time"
)

// clientPreface opens the client's side of every HTTP/2 connection
// (RFC 9113 §3.4); the server's side opens with a SETTINGS frame.
const clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// HTTP/2 frame layout and the codes the guard reads or writes (RFC 9113 §4.1, §6, §7).
const (
	frameHeaderLen     = 9
	frameHeaders       = 0x1
	frameRSTStream     = 0x3
	frameGoAway        = 0x7
	errEnhanceYourCalm = 0xb
)

// frames follows a byte stream of HTTP/2 frames as it passes, in chunks
// of any size: it reads each frame's 9-byte header and skips its payload,
// and counts the streams a client opens and resets. It never reads a
// payload and never allocates.
type frames struct {
	preface int                  // bytes of the client preface still to come (inbound only)
	hdr     [frameHeaderLen]byte // the frame header being read
	nhdr    int                  // bytes of hdr read so far
	skip    uint32               // payload bytes of the current frame still to pass
	last    uint32               // the highest stream id a HEADERS frame opened
	off     bool                 // the bytes are not HTTP/2 (a wrong preface): no longer followed

	// ages, when not nil, is where the connection's young streams are
	// followed: inbound, when the latest streams opened, at now (the
	// caller's clock, in nanoseconds, set before each feed), so that
	// resets of young streams count as premature; outbound (server), which
	// of them the server answered.
	ages   *streamAges
	now    int64
	server bool // the server's frames (outbound)
}

// prematureAge is the age under which a reset of a stream the server
// has not answered is premature: no client waiting for an answer gives
// up that soon, while a rapid-reset flood resets each stream in the write
// that opened it.
const prematureAge = int64(time.Millisecond)

// streamAges holds the open times of the latest streams a client opened,
// by stream id, and whether the server answered them (sent HEADERS):
// client streams have odd ids, rising, so the slots hold the last
// len(slots) of them. A reset of an older stream is not found, and so not
// premature, which is right: those streams lived while others opened. The
// connection's reader writes id and at; its writer marks answered.
type streamAges struct {
	slots [32]streamAge
}

// streamAge is a slot of streamAges.
type streamAge struct {
	id       uint32
	at       int64
	answered atomic.Uint32 // the id of the last stream of this slot the server answered
}

// open records that stream id opened at now.
func (a *streamAges) open(id uint32, now int64) {
	s := &a.slots[(id>>1)%uint32(len(a.slots))]
	s.id, s.at = id, now
}

// answer records that the server answered stream id.
func (a *streamAges) answer(id uint32) {
	a.slots[(id>>1)%uint32(len(a.slots))].answered.Store(id)
}

// young reports whether stream id opened less than prematureAge before
// now and has no answer from the server yet.
func (a *streamAges) young(id uint32, now int64) bool {
	s := &a.slots[(id>>1)%uint32(len(a.slots))]
	return s.id == id && id != 0 && now-s.at < prematureAge && s.answered.Load() != id
}

// newInbound returns a follower of a client's bytes, which start with
// the client preface.
func newInbound() frames { return frames{preface: len(clientPreface)} }

// feed follows b, the next bytes of the stream, and returns how many
// streams HEADERS frames opened in it (a HEADERS frame on a stream id
// above every one before), how many RST_STREAM frames it held, and how
// many of those reset a young stream (premature; only with ages). A
// stream that does not start with the client preface (inbound) is no
// longer followed: off is set and nothing more is counted.
func (f *frames) feed(b []byte) (opened, resets, premature int) {
	for len(b) > 0 && !f.off {
		switch {
		case f.preface > 0:
			n := min(f.preface, len(b))
			at := len(clientPreface) - f.preface
			if string(b[:n]) != clientPreface[at:at+n] {
				f.off = true
				return opened, resets, premature
			}
			f.preface -= n
			b = b[n:]
		case f.skip > 0:
			n := f.skip
			if uint64(len(b)) < uint64(n) {
				n = uint32(len(b))
			}
			f.skip -= n
			b = b[n:]
		default:
			n := copy(f.hdr[f.nhdr:], b)
			f.nhdr += n
			b = b[n:]
			if f.nhdr < frameHeaderLen {
				return opened, resets, premature
			}
			f.nhdr = 0
			f.skip = payloadLen(&f.hdr)
			switch f.hdr[3] {
			case frameHeaders:
				if f.server {
					if f.ages != nil {
						f.ages.answer(streamID(&f.hdr))
					}
				} else if id := streamID(&f.hdr); id > f.last {
					f.last = id
					opened++
					if f.ages != nil {
						f.ages.open(id, f.now)
					}
				}
			case frameRSTStream:
				resets++
				if f.ages != nil && f.ages.young(streamID(&f.hdr), f.now) {
					premature++
				}
			}
		}
	}
	return opened, resets, premature
}

// atBoundary reports whether the bytes followed so far end between two
// frames (outbound: where a GOAWAY may go).
func (f *frames) atBoundary() bool { return f.nhdr == 0 && f.skip == 0 }

// until returns how many leading bytes of b end the frame in progress: 0
// at a frame boundary, -1 when b ends before the frame does.
func (f *frames) until(b []byte) int {
	if f.atBoundary() {
		return 0
	}
	n, skip := 0, f.skip
	if f.nhdr > 0 {
		hdr := f.hdr
		n = copy(hdr[f.nhdr:], b)
		if f.nhdr+n < frameHeaderLen {
			return -1
		}
		skip = payloadLen(&hdr)
	}
	if uint64(len(b)-n) < uint64(skip) {
		return -1
	}
	return n + int(skip)
}

// payloadLen is the payload length a frame header gives.
func payloadLen(h *[frameHeaderLen]byte) uint32 {
	return uint32(h[0])<<16 | uint32(h[1])<<8 | uint32(h[2])
}

// streamID is the stream id a frame header gives.
func streamID(h *[frameHeaderLen]byte) uint32 {
	return (uint32(h[5])<<24 | uint32(h[6])<<16 | uint32(h[7])<<8 | uint32(h[8])) & (1<<31 - 1)
}

// goAwayFrame is a GOAWAY frame with ENHANCE_YOUR_CALM, last stream id
// last and debug data debug.
func goAwayFrame(last uint32, debug string) []byte {
	n := 8 + len(debug)
	b := make([]byte, 0, frameHeaderLen+n)
	b = append(b, byte(n>>16), byte(n>>8), byte(n), frameGoAway, 0, 0, 0, 0, 0)
	last &= 1<<31 - 1
	b = append(b, byte(last>>24), byte(last>>16), byte(last>>8), byte(last))
	b = append(b, 0, 0, 0, errEnhanceYourCalm)
	return append(b, debug...)
}

// budget is a token bucket of stream resets: burst at once, refilled at
// rate a second.
type budget struct {
	burst, rate float64
	tokens      float64
	last        time.Time // when tokens was last brought up to date; zero: never (a full bucket)
}

// take spends n resets at now, and reports whether the budget covered
// them.
func (b *budget) take(n int, now time.Time) bool {
	if b.last.IsZero() {
		b.tokens = b.burst
	} else if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
	}
	b.last = now
	b.tokens -= float64(n)
	return b.tokens >= 0
}
