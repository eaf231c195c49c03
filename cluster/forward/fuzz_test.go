package forward

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/cluster/forward/forwardpb"
	"github.com/groveml/grove/servables"
)

// fuzzMaxMsg is the fuzzed server's MaxMessageBytes, and the fuzzed
// client's largest answer.
const fuzzMaxMsg = 64 << 10

// fuzzChunk is the most a frame carries on the fuzzed connections: small,
// so that short inputs hold chunked messages.
const fuzzChunk = 256

// fuzzCompute is compute for requests from the fuzzer: a FLOAT input's
// row count is bounded (its shape can claim 2^40 rows of 0 columns, and
// compute makes an output of one float per row).
func fuzzCompute(ctx context.Context, req ForwardedRequest) (Answer, error) {
	for _, in := range req.Inputs {
		if in.DType == servables.Float32 && len(in.Shape) == 2 && in.Shape[0] > 1<<16 {
			return Answer{}, fmt.Errorf("%w: input %s has %d rows", servables.ErrInvalidInput, in.Name, in.Shape[0])
		}
	}
	return compute(ctx, req)
}

// FuzzServerFrames feeds a framed server's connection (fuzzChunk bytes to
// a frame) with the bytes a client sends after the preface: the server
// must answer only with well-formed answers and failures, whole or
// chunked, then close the connection at the input's end, within 5 s,
// never panicking; the answers are checked to decode.
func FuzzServerFrames(f *testing.F) {
	// The AsyncLocal path, as a grove node serves.
	srv, err := NewServer(asyncFunc{fuzzCompute}, ServerOptions{Node: "b", AllowUnauthenticatedPeers: true,
		MaxMessageBytes: fuzzMaxMsg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	srv.chunk = fuzzChunk
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	f.Cleanup(func() {
		stopped := make(chan struct{})
		go func() {
			srv.Stop()
			<-served
			close(stopped)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		select {
		case <-stopped:
		case <-ctx.Done():
			f.Error("the server did not stop: a connection hangs")
		}
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		nc, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = nc.Close() }()
		_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
		wrote := make(chan error, 1)
		go func() {
			_, err := nc.Write(append(prefaceOf(protocolVersion), data...))
			_ = nc.(*net.TCPConn).CloseWrite()
			wrote <- err
		}()
		r := bufio.NewReader(nc)
		got := make([]byte, prefaceLen)
		if _, err := io.ReadFull(r, got); err != nil || !bytes.Equal(got, prefaceOf(protocolVersion)) {
			t.Fatalf("the server's preface: %q, %v", got, err)
		}
		mr := &messageReader{r: r}
		for {
			h, b, err := mr.next()
			if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) { // ECONNRESET: the server closed with input unread
				break
			}
			if err != nil {
				t.Fatalf("reading the server's frames: %v (a hang if a timeout)", err)
			}
			switch h.typ {
			case frameAnswer:
				var m forwardpb.PredictResponse
				if err := proto.Unmarshal(b, &m); err != nil {
					t.Fatalf("an answer that does not decode: %v", err)
				}
				if _, err := decodeAnswer(&m); err != nil || m.GetNode() != "b" {
					t.Fatalf("an answer of node %q that does not decode: %v", m.GetNode(), err)
				}
			case frameFailure:
				var m forwardpb.Failure
				if err := proto.Unmarshal(b, &m); err != nil {
					t.Fatalf("a failure that does not decode: %v", err)
				}
				if _, ok := parseKind(m.GetKind()); !ok || m.GetNode() != "b" || m.GetMessage() == "" {
					t.Fatalf("a failure without a known kind, node or message: %v", &m)
				}
			default:
				t.Fatalf("frame type %d from the server", h.typ)
			}
		}
		// The write ends when the server has read everything or closed the
		// connection; either way it ends within the deadline.
		<-wrote
	})
}

// FuzzClientFrames feeds a client connection's reader (readLoop;
// fuzzChunk bytes to a frame), one call waiting (id 1), with the bytes a
// server sends after the preface:
// the reader must return at the call's answer or the input's end, with no
// call left waiting and the call given a result, which decodes to an
// answer or a *RemoteError, never a panic.
func FuzzClientFrames(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		nc, other := net.Pipe()
		defer func() { _ = other.Close() }()
		p := &pending{ch: make(chan frameResult, 1), sent: true}
		c := &clientConn{nc: nc, r: bufio.NewReaderSize(bytes.NewReader(data), frameHeaderLen+fuzzChunk), maxAnswer: fuzzMaxMsg, chunk: fuzzChunk,
			w: newFrameWriter(), lastID: 1, waiting: map[uint64]*pending{1: p}, reading: true}
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.readLoop()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatal("the reader did not return at its input's end")
		}
		c.mu.Lock()
		waiting, reading := len(c.waiting), c.reading
		c.mu.Unlock()
		if waiting != 0 || reading {
			t.Fatalf("the reader returned with %d calls waiting (still reading: %v)", waiting, reading)
		}
		var r frameResult
		select {
		case r = <-p.ch:
		default:
			t.Fatal("the connection ended without a result for the waiting call")
		}
		if r.err != nil {
			return
		}
		a, err := decodeFramed(Peer{Name: "b", Addr: "127.0.0.1:1"}, r)
		if err == nil {
			if r.typ != frameAnswer {
				t.Fatalf("frame type %d decoded to an answer", r.typ)
			}
			for _, out := range a.Outputs {
				if err := out.Validate(); err != nil {
					t.Fatalf("an answer with an invalid output: %v", err)
				}
			}
			return
		}
		var re *RemoteError
		if !errors.As(err, &re) || !slices.Contains(allKinds(), re.Kind) || re.Node == "" {
			t.Fatalf("a failed call's error %v (%T) is no RemoteError of a known kind from a named node", err, err)
		}
	})
}

// concat is its arguments end to end.
func concat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// serverSeeds are FuzzServerFrames' seed inputs: what clients send after
// the preface, valid and not.
func serverSeeds(t testing.TB) map[string][]byte {
	call := callPayload(t, sumRequest(t))
	held := callPayload(t, heldRequest(t, "x"))
	req := sumRequest(t)
	m := encodeRequest(&req)
	m.Hops = 2
	secondHop, err := proto.Marshal(&forwardpb.Call{Request: m, TimeoutNanos: int64(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	m = encodeRequest(&req)
	m.Inputs[0].Datatype = "FLOAT128"
	badType, err := proto.Marshal(&forwardpb.Call{Request: m, TimeoutNanos: int64(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	big := sumRequest(t)
	big.Inputs = append(big.Inputs, f32(t, "y", []int64{4, 64}, make([]float32, 256)...))
	long := callPayload(t, big) // some 1.2 KiB: chunked at fuzzChunk
	if len(long) <= fuzzChunk || len(call) > fuzzChunk {
		t.Fatalf("a call of %d bytes and a long one of %d: want one frame and several at %d", len(call), len(long), fuzzChunk)
	}
	whole := frame(frameCall, 1, call)
	longFrames := chunked(frameCall, 3, long, fuzzChunk)
	head, data := longFrames[:frameHeaderLen+headLen], longFrames[frameHeaderLen+headLen:]
	firstData := data[:frameHeaderLen+fuzzChunk]
	return map[string][]byte{
		"call":                whole,
		"two-calls":           concat(whole, frame(frameCall, 2, call)),
		"call-then-cancel":    concat(frame(frameCall, 1, held), frame(frameCancel, 1, nil)),
		"duplicate-id":        concat(frame(frameCall, 5, call), frame(frameCall, 5, call)),
		"cancel-unknown":      concat(frame(frameCancel, 9, []byte("x")), whole),
		"malformed-call":      frame(frameCall, 1, []byte{0xff, 0xff, 0xff}),
		"no-deadline":         frame(frameCall, 1, mustMarshal(t, &forwardpb.Call{Request: encodeRequest(&req)})),
		"second-hop":          frame(frameCall, 1, secondHop),
		"unknown-datatype":    frame(frameCall, 1, badType),
		"unknown-type":        concat(whole, frame(9, 1, []byte("x"))),
		"answer-from-client":  frame(frameAnswer, 1, nil),
		"frame-over-chunk":    concat(frame(frameCall, 1, long), whole),
		"truncated-frame":     whole[:len(whole)-3],
		"truncated-header":    whole[:5],
		"empty":               nil,
		"chunked-call":        concat(longFrames, whole),
		"chunked-interleaved": concat(head, firstData, whole, frame(frameCancel, 9, nil), data[len(firstData):]),
		"chunked-over-limit":  concat(chunkHead(frameCall, 4, fuzzMaxMsg+callOverhead+1), ofCall(firstData, 4), whole),
		"chunked-cancelled":   concat(head, firstData, frame(frameCancel, 3, nil), whole),
		"chunked-truncated":   longFrames[:len(longFrames)-7],
		"data-without-head":   concat(data, whole),
		"head-during-chunked": concat(head, firstData, chunkHead(frameCall, 4, 1000), whole),
		"data-past-end":       concat(chunkHead(frameCall, 3, fuzzChunk+1), firstData),
		"empty-data":          concat(head, frame(frameData, 3, nil)),
		"head-wrong-length":   concat(frame(frameCall|frameChunked, 3, []byte{1, 2, 3}), whole),
		"head-fits-a-frame":   concat(chunkHead(frameCall, 3, fuzzChunk), whole),
		"whole-during-chunk":  concat(head, firstData, frame(frameCall, 3, call)),
	}
}

// ofCall is frame b, whole, given to call id.
func ofCall(b []byte, id uint64) []byte {
	b = slices.Clone(b)
	binary.BigEndian.PutUint64(b[5:frameHeaderLen], id)
	return b
}

// clientSeeds are FuzzClientFrames' seed inputs: what servers send after
// the preface to a client whose call 1 waits, valid and not.
func clientSeeds(t testing.TB) map[string][]byte {
	a, err := compute(context.Background(), ForwardedRequest{Request: sumRequest(t)})
	if err != nil {
		t.Fatal(err)
	}
	answer := mustMarshal(t, encodeAnswer(&a, "b"))
	failure := mustMarshal(t, &forwardpb.Failure{Kind: servables.Unavailable.String(), Code: 14, Node: "b", Message: "model m/ is loading"})
	longFailure := mustMarshal(t, &forwardpb.Failure{Kind: servables.InvalidInput.String(), Code: 3, Node: "b", Message: strings.Repeat("input x is wrong; ", 40)})
	big := sumRequest(t)
	big.Inputs = []servables.Tensor{f32(t, "x", []int64{64, 2}, make([]float32, 128)...)}
	ba, err := compute(context.Background(), ForwardedRequest{Request: big})
	if err != nil {
		t.Fatal(err)
	}
	longAnswer := mustMarshal(t, encodeAnswer(&ba, "b"))
	if len(answer) > fuzzChunk || len(longAnswer) <= fuzzChunk || len(longFailure) <= fuzzChunk {
		t.Fatalf("answers of %d, %d and %d bytes: want one frame, then several at %d", len(answer), len(longAnswer), len(longFailure), fuzzChunk)
	}
	long := chunked(frameAnswer, 1, longAnswer, fuzzChunk)
	head, data := long[:frameHeaderLen+headLen], long[frameHeaderLen+headLen:]
	firstData := data[:frameHeaderLen+fuzzChunk]
	over := frame(frameAnswer, 1, nil)
	putFrameHeader(over, frameHeader{length: fuzzChunk + 1, typ: frameAnswer, id: 1})
	return map[string][]byte{
		"answer":                      frame(frameAnswer, 1, answer),
		"failure":                     frame(frameFailure, 1, failure),
		"unknown-kind":                frame(frameFailure, 1, mustMarshal(t, &forwardpb.Failure{Kind: "weird", Code: 99})),
		"goaway-then-answer":          concat(frame(frameGoaway, 0, nil), frame(frameAnswer, 1, answer)),
		"unknown-id":                  concat(frame(frameAnswer, 7, answer), frame(frameAnswer, 1, answer)),
		"malformed-answer":            frame(frameAnswer, 1, []byte{0x1a, 0xff, 0xff}),
		"malformed-failure":           frame(frameFailure, 1, []byte{0x0a, 0x05, 'x'}),
		"empty-failure":               frame(frameFailure, 1, nil),
		"unknown-type":                frame(42, 1, []byte("x")),
		"call-from-server":            frame(frameCall, 1, nil),
		"frame-over-chunk":            concat(over, make([]byte, 16)),
		"truncated-answer":            frame(frameAnswer, 1, answer)[:20],
		"two-answers-one-id":          concat(frame(frameAnswer, 1, answer), frame(frameAnswer, 1, answer)),
		"empty":                       nil,
		"goaway-with-payload":         frame(frameGoaway, 0, []byte("bye")),
		"chunked-answer":              long,
		"chunked-failure":             chunked(frameFailure, 1, longFailure, fuzzChunk),
		"chunked-interleaved":         concat(head, firstData, frame(frameAnswer, 7, answer), frame(frameGoaway, 0, nil), data[len(firstData):]),
		"chunked-for-unknown-id":      concat(chunked(frameAnswer, 9, longAnswer, fuzzChunk), frame(frameAnswer, 1, answer)),
		"chunked-over-limit":          concat(chunkHead(frameAnswer, 1, fuzzMaxMsg+1), firstData),
		"chunked-truncated":           long[:len(long)-5],
		"data-without-head":           data,
		"head-during-chunked":         concat(head, firstData, chunkHead(frameFailure, 2, 1000)),
		"data-past-end":               concat(chunkHead(frameAnswer, 1, fuzzChunk+1), firstData),
		"empty-data":                  concat(head, frame(frameData, 1, nil)),
		"head-wrong-length":           frame(frameAnswer|frameChunked, 1, []byte{1}),
		"whole-answer-during-chunked": concat(head, firstData, frame(frameAnswer, 1, answer)),
		"chunked-call-from-server":    chunkHead(frameCall, 1, 1000),
	}
}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestWriteFuzzCorpus writes the seeds of FuzzServerFrames and
// FuzzClientFrames to testdata/fuzz when FORWARD_WRITE_CORPUS=1, and
// otherwise checks that the checked-in corpus has them all.
func TestWriteFuzzCorpus(t *testing.T) {
	for target, seeds := range map[string]map[string][]byte{"FuzzServerFrames": serverSeeds(t), "FuzzClientFrames": clientSeeds(t)} {
		dir := filepath.Join("testdata", "fuzz", target)
		for name, s := range seeds {
			file := filepath.Join(dir, name)
			content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
			if os.Getenv("FORWARD_WRITE_CORPUS") == "1" {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if b, err := os.ReadFile(file); err != nil || string(b) != content {
				t.Errorf("%s is not seed %s (%v): run FORWARD_WRITE_CORPUS=1 go test ./cluster/forward -run TestWriteFuzzCorpus", file, name, err)
			}
		}
	}
}
