package grpcserver

import (
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// serverWindows connects to a server made with opts as an HTTP/2 client
// and returns the stream window its SETTINGS announce (0: none announced,
// HTTP/2's 65535) and the connection window its first WINDOW_UPDATE on
// stream 0 adds to the 65535 every connection starts with (0: none).
func serverWindows(t *testing.T, opts Options) (stream uint32, connIncrement uint32) {
	t.Helper()
	s := New(opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(ln) }()
	defer s.Stop()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	// The server sends its SETTINGS first, then (with a larger connection
	// window) a WINDOW_UPDATE on stream 0, and acks ours; read until both
	// its SETTINGS and our ack have come.
	var settings, acked bool
	for !settings || !acked {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("reading the server's frames: %v", err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				acked = true
				continue
			}
			settings = true
			if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
				stream = v
			}
			if err := fr.WriteSettingsAck(); err != nil {
				t.Fatal(err)
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 && connIncrement == 0 {
				connIncrement = f.Increment
			}
		}
	}
	return stream, connIncrement
}

func TestWindowBytes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		window     int32
		wantStream uint32 // 0: gRPC's dynamic default, not the fixed window
		wantConn   uint32
	}{
		{"4 MiB", 4 << 20, 4 << 20, 16<<20 - 65535},
		{"raised to 64 KiB", 1000, 64 << 10, 256<<10 - 65535},
		{"near the HTTP/2 limit", 1 << 30, 1 << 30, 1<<31 - 1 - 65535},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stream, conn := serverWindows(t, Options{WindowBytes: tc.window})
			if stream != tc.wantStream || conn != tc.wantConn {
				t.Errorf("WindowBytes %d: stream window %d, connection window +%d; want %d, +%d", tc.window, stream, conn, tc.wantStream, tc.wantConn)
			}
		})
	}
	// Without it the server keeps gRPC's dynamic windows, which start at
	// gRPC's own default and grow as the bandwidth probe finds room.
	stream, _ := serverWindows(t, Options{})
	if stream == 4<<20 || stream == 64<<10 {
		t.Errorf("without WindowBytes the stream window is %d, a fixed one", stream)
	}
}
