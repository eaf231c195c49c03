// Package h2guardtest is the rapid-reset attacker of the tests of
// transport/h2guard and of the servers it guards (the gRPC listeners,
// HTTP over TLS, the cluster's peer port, the grove binary in it/): Flood
// speaks raw HTTP/2 with golang.org/x/net/http2's Framer, opening streams
// and resetting each at once, without pause, and reports how the server
// ended the connection.
package h2guardtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Request is what each stream of a flood asks for.
type Request struct {
	// Method, Scheme, Authority and Path are the request's
	// pseudo-headers; "" means POST, https, localhost and "/".
	Method, Scheme, Authority, Path string
	// GRPC adds the headers of a gRPC call (content-type
	// application/grpc, te: trailers).
	GRPC bool
}

// Result is how a flood went.
type Result struct {
	// Streams is how many streams it opened (each reset at once).
	Streams int
	// GoAway is the GOAWAY the server sent, if any.
	GoAway *GoAway
	// FramesAfterGoAway counts the frames read after the GOAWAY.
	FramesAfterGoAway int
	// ReadErr ended reading the server's frames: io.EOF when the server
	// closed the connection cleanly, context.Canceled-like errors when
	// the flood was stopped first.
	ReadErr error
	// Elapsed is how long the flood ran, from its first byte to the end
	// of reading.
	Elapsed time.Duration
}

// GoAway is a GOAWAY frame.
type GoAway struct {
	Code         http2.ErrCode
	LastStreamID uint32
	Debug        string
}

// batch is how many streams Flood opens and resets per write.
const batch = 64

// Flood opens streams on c (a connection to an HTTP/2 server, after any
// TLS handshake that chose h2) with req's headers and resets each with
// CANCEL right away, in batches written without pause, until max streams
// (0: no limit) or until ctx is done, the server ends the connection or
// a write fails; it acknowledges the server's SETTINGS and PINGs as a
// client must, reads until the server closes the connection (or ctx is
// done), and closes c.
func Flood(ctx context.Context, c net.Conn, req Request, max int) Result {
	start := time.Now()
	var (
		wmu sync.Mutex
		bw  = bufio.NewWriterSize(c, 64<<10)
		fr  = http2.NewFramer(bw, c)
	)
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Now()) })
	defer stop()
	defer c.Close()

	// The preface goes first, before the reader may answer the server's
	// SETTINGS (a server writes its SETTINGS without waiting for the
	// preface, and an ACK ahead of the preface is a bogus greeting).
	_, err := io.WriteString(bw, http2.ClientPreface)
	if err == nil {
		err = fr.WriteSettings()
	}
	if err == nil {
		err = bw.Flush()
	}
	res := Result{}
	readDone := make(chan struct{})
	var ended sync.WaitGroup
	ended.Add(1)
	go func() {
		defer ended.Done()
		defer close(readDone)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				res.ReadErr = err
				return
			}
			if res.GoAway != nil {
				res.FramesAfterGoAway++
			}
			switch f := f.(type) {
			case *http2.GoAwayFrame:
				res.GoAway = &GoAway{Code: f.ErrCode, LastStreamID: f.LastStreamID, Debug: string(f.DebugData())}
			case *http2.SettingsFrame:
				if !f.IsAck() {
					wmu.Lock()
					_ = fr.WriteSettingsAck()
					_ = bw.Flush()
					wmu.Unlock()
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					wmu.Lock()
					_ = fr.WritePing(true, f.Data)
					_ = bw.Flush()
					wmu.Unlock()
				}
			}
		}
	}()

	var hbuf bytes.Buffer
	enc := hpack.NewEncoder(&hbuf)
	fields := headerFields(req)
	id := uint32(1)
	for err == nil && (max <= 0 || res.Streams < max) {
		select {
		case <-readDone:
			err = errors.New("the server ended the connection")
			continue
		default:
		}
		wmu.Lock()
		for i := 0; i < batch && err == nil && (max <= 0 || res.Streams < max); i++ {
			hbuf.Reset()
			for _, hf := range fields {
				_ = enc.WriteField(hf)
			}
			err = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hbuf.Bytes(), EndHeaders: true})
			if err == nil {
				err = fr.WriteRSTStream(id, http2.ErrCodeCancel)
			}
			if err == nil {
				res.Streams++
				id += 2
			}
		}
		if err == nil {
			err = bw.Flush()
		}
		wmu.Unlock()
	}
	ended.Wait()
	res.Elapsed = time.Since(start)
	return res
}

// headerFields are the header fields of req.
func headerFields(req Request) []hpack.HeaderField {
	or := func(s, def string) string {
		if s == "" {
			return def
		}
		return s
	}
	fs := []hpack.HeaderField{
		{Name: ":method", Value: or(req.Method, "POST")},
		{Name: ":scheme", Value: or(req.Scheme, "https")},
		{Name: ":authority", Value: or(req.Authority, "localhost")},
		{Name: ":path", Value: or(req.Path, "/")},
	}
	if req.GRPC {
		fs = append(fs, hpack.HeaderField{Name: "content-type", Value: "application/grpc"}, hpack.HeaderField{Name: "te", Value: "trailers"})
	}
	return fs
}
