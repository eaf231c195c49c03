package h2guard_test

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/groveml/grove/internal/certtest"
	"github.com/groveml/grove/transport/h2guard"
	"github.com/groveml/grove/transport/h2guard/h2guardtest"
)

// testGuard returns a guard for listener counted in a new registry, and
// a function reading its count of closes.
func testGuard(t *testing.T, opts h2guard.Options) (*h2guard.Guard, func() float64) {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts.Registerer = reg
	opts.Logger = slog.New(slog.DiscardHandler)
	g := h2guard.New(opts)
	return g, func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == h2guard.MetricName {
				for _, m := range mf.GetMetric() {
					return m.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
}

// serveGRPC serves the health service (SERVING) with creds on a loopback
// port and returns its address.
func serveGRPC(t *testing.T, creds credentials.TransportCredentials) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.Creds(creds))
	healthpb.RegisterHealthServer(s, health.NewServer())
	go func() { _ = s.Serve(ln) }()
	t.Cleanup(s.Stop)
	return ln.Addr().String()
}

// checkGoAway fails t unless res ended with the guard's GOAWAY
// (ENHANCE_YOUR_CALM, a stream the flood opened) and then the server's
// close, soon after the flood passed budget.
func checkGoAway(t *testing.T, res h2guardtest.Result, budget int) {
	t.Helper()
	if res.GoAway == nil {
		t.Fatalf("the flood of %d streams got no GOAWAY (read error %v)", res.Streams, res.ReadErr)
	}
	if res.GoAway.Code != http2.ErrCodeEnhanceYourCalm || res.GoAway.Debug != "too_many_resets" {
		t.Errorf("GOAWAY %v %q, want ENHANCE_YOUR_CALM too_many_resets", res.GoAway.Code, res.GoAway.Debug)
	}
	if res.GoAway.LastStreamID == 0 || res.GoAway.LastStreamID > uint32(2*res.Streams) {
		t.Errorf("GOAWAY last stream %d, want one the flood opened (it opened %d)", res.GoAway.LastStreamID, res.Streams)
	}
	if !errors.Is(res.ReadErr, io.EOF) && !strings.Contains(fmt.Sprint(res.ReadErr), "connection reset") {
		t.Errorf("after the GOAWAY the flood read %v, want the connection closed", res.ReadErr)
	}
	if res.FramesAfterGoAway != 0 {
		t.Errorf("%d frames after the GOAWAY, want none", res.FramesAfterGoAway)
	}
	// The flood writes on until its socket buffers fill (megabytes on
	// loopback) while the server lingers: the streams it wrote say
	// nothing of the server's work, only that the budget was passed.
	if res.Streams <= budget {
		t.Errorf("the flood opened %d streams, within the budget %d", res.Streams, budget)
	}
	if res.Elapsed > 10*time.Second {
		t.Errorf("the connection closed %v after the flood began, want within seconds", res.Elapsed)
	}
}

func TestGRPCFloodGetsGoAwayEnhanceYourCalmAndIsCounted(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			g, closed := testGuard(t, h2guard.Options{Listener: "grpc"})
			var inner credentials.TransportCredentials
			var clientTLS *tls.Config
			if useTLS {
				ca := certtest.NewCA(t, "ca")
				inner = credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{ca.Server(t, "server").TLS(t)}, NextProtos: []string{"h2"}})
				clientTLS = &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{"h2"}}
			}
			addr := serveGRPC(t, g.Creds(inner))
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			if clientTLS != nil {
				cfg := clientTLS.Clone()
				cfg.ServerName = "127.0.0.1"
				tc := tls.Client(c, cfg)
				if err := tc.Handshake(); err != nil {
					t.Fatal(err)
				}
				c = tc
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			res := h2guardtest.Flood(ctx, c, h2guardtest.Request{Scheme: "http", Path: "/grpc.health.v1.Health/Check", GRPC: true}, 0)
			checkGoAway(t, res, h2guard.PrematureMin)
			if n := closed(); n != 1 {
				t.Errorf("%s = %v, want 1", h2guard.MetricName, n)
			}
			// The server still serves others.
			cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(clientCreds(clientTLS)))
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			if _, err := healthpb.NewHealthClient(cc).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatalf("a call after the flood: %v", err)
			}
		})
	}
}

func clientCreds(c *tls.Config) credentials.TransportCredentials {
	if c == nil {
		return insecure.NewCredentials()
	}
	c = c.Clone()
	c.ServerName = "127.0.0.1"
	return credentials.NewTLS(c)
}

// TestGRPCClientCancellingEveryCallWithinTheRateKeepsItsConnection: a
// grpc-go client that cancels every call (a Watch stream, cancelled
// after its first answer), four times the burst in all at half the
// rate, and a burst of concurrent calls cancelled together, is never
// closed.
func TestGRPCClientCancellingEveryCallWithinTheRateKeepsItsConnection(t *testing.T) {
	const burst, rate = 100, 500
	g, closed := testGuard(t, h2guard.Options{Listener: "grpc", Burst: burst, Rate: rate})
	addr := serveGRPC(t, g.Creds(nil))
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	watchThenCancel := func() error {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return err
		}
		_, err = w.Recv()
		return err
	}
	tick := time.NewTicker(time.Second / (rate / 2))
	defer tick.Stop()
	for i := range 4 * burst {
		<-tick.C
		if err := watchThenCancel(); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	time.Sleep(time.Second / 2) // refills the bucket
	var wg sync.WaitGroup
	errs := make(chan error, burst/2)
	for range burst / 2 {
		wg.Go(func() {
			if err := watchThenCancel(); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("a concurrent call: %v", err)
	}
	// A call with a deadline that expires, as a client's timeout does.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{}); err == nil {
		for err == nil {
			_, err = w.Recv()
		}
	}
	if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("a call after the cancellations: %v", err)
	}
	if n := closed(); n != 0 {
		t.Errorf("%s = %v, want 0", h2guard.MetricName, n)
	}
}

// tlsServer serves h over TLS (client certificates verified if given)
// with its HTTP/2 guarded by g, and returns its address and the CA.
func tlsServer(t *testing.T, g *h2guard.Guard, h http.Handler) (string, *certtest.CA) {
	t.Helper()
	ca := certtest.NewCA(t, "ca")
	srv := &http.Server{Handler: h, IdleTimeout: time.Minute, TLSConfig: &tls.Config{
		Certificates: []tls.Certificate{ca.Server(t, "server").TLS(t)},
		ClientAuth:   tls.VerifyClientCertIfGiven, ClientCAs: ca.Pool(),
	}}
	if err := g.ConfigureServer(srv); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String(), ca
}

// TestHTTPOverTLSServesHTTP2WithTheClientCertificateAndSurvivesCancels:
// behind the guard, handlers still see HTTP/2, r.TLS and the client's
// certificate (mTLS authentication reads it), and a client that cancels
// requests keeps its connection.
func TestHTTPOverTLSServesHTTP2WithTheClientCertificateAndSurvivesCancels(t *testing.T) {
	g, closed := testGuard(t, h2guard.Options{Listener: "http"})
	addr, ca := tlsServer(t, g, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-r.Context().Done()
			return
		}
		cn := "none"
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		fmt.Fprintf(w, "%s tls=%v cn=%s", r.Proto, r.TLS != nil && r.TLS.HandshakeComplete, cn)
	}))
	cert := ca.Client(t, "alice", time.Now().Add(-time.Hour), time.Now().Add(time.Hour)).TLS(t)
	tr := &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{cert}}}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	get := func(ctx context.Context, path string) (string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+path, nil)
		resp, err := client.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	if got, err := get(context.Background(), "/"); err != nil || got != "HTTP/2.0 tls=true cn=alice" {
		t.Fatalf("GET = %q, %v; want HTTP/2.0 tls=true cn=alice", got, err)
	}
	for range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		_, _ = get(ctx, "/slow")
		cancel()
	}
	if got, err := get(context.Background(), "/"); err != nil || got != "HTTP/2.0 tls=true cn=alice" {
		t.Fatalf("GET after cancels = %q, %v", got, err)
	}
	if n := closed(); n != 0 {
		t.Errorf("%s = %v after cancels at a client's pace, want 0", h2guard.MetricName, n)
	}
}

func TestHTTPOverTLSFloodGetsGoAwayEnhanceYourCalm(t *testing.T) {
	g, closed := testGuard(t, h2guard.Options{Listener: "http"})
	addr, ca := tlsServer(t, g, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), NextProtos: []string{"h2"}, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("negotiated %q, want h2", p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res := h2guardtest.Flood(ctx, c, h2guardtest.Request{Method: "GET"}, 0)
	checkGoAway(t, res, h2guard.PrematureMin)
	if n := closed(); n != 1 {
		t.Errorf("%s = %v, want 1", h2guard.MetricName, n)
	}
}

// TestReconnectingFlooderIsHeldBeforeItsTLSHandshakeAndGetsASmallBudget:
// once a flood from an address was closed, a new connection from it (on
// another port) is held before its TLS handshake, on the gRPC listener
// and on HTTP over TLS, counted, and closed after far fewer resets; a
// connection made before the trip keeps working.
func TestReconnectingFlooderIsHeldBeforeItsTLSHandshakeAndGetsASmallBudget(t *testing.T) {
	const burst = 1024
	ca := certtest.NewCA(t, "ca")
	serverCert := ca.Server(t, "server").TLS(t)
	for _, listener := range []string{"grpc", "http"} {
		t.Run(listener, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			g := h2guard.New(h2guard.Options{Listener: listener, Burst: burst, Registerer: reg, Logger: slog.New(slog.DiscardHandler)})
			var addr string
			req := h2guardtest.Request{Method: "GET", Path: "/"}
			if listener == "grpc" {
				addr = serveGRPC(t, g.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{serverCert}, NextProtos: []string{"h2"}})))
				req = h2guardtest.Request{Scheme: "https", Path: "/grpc.health.v1.Health/Check", GRPC: true}
			} else {
				addr, ca = tlsServer(t, g, http.NotFoundHandler())
			}
			dial := func() (net.Conn, time.Duration) {
				t.Helper()
				start := time.Now()
				c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "127.0.0.1", NextProtos: []string{"h2"}})
				if err != nil {
					t.Fatal(err)
				}
				return c, time.Since(start)
			}
			early, _ := dial() // made before the trip: never held
			defer early.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			c, _ := dial()
			checkGoAway(t, h2guardtest.Flood(ctx, c, req, 0), h2guard.PrematureMin)

			c, took := dial()
			if took < 100*time.Millisecond {
				t.Errorf("the flooder's next TLS handshake took %v, want held at least 100ms", took)
			}
			res := h2guardtest.Flood(ctx, c, req, 0)
			checkGoAway(t, res, h2guard.PrematureMin/2)
			// Only what the flood wrote before the GOAWAY reached it is
			// bounded: the server read at most the reduced budget's worth.
			if res.GoAway != nil && res.GoAway.LastStreamID > 2*burst {
				t.Errorf("the held connection's GOAWAY names stream %d: more than %d streams were served, want about %d", res.GoAway.LastStreamID, burst, burst/2)
			}
			mfs, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			held := 0.0
			for _, mf := range mfs {
				if mf.GetName() == h2guard.HeldMetricName {
					held = mf.GetMetric()[0].GetCounter().GetValue()
				}
			}
			if held != 1 {
				t.Errorf("%s = %v, want 1", h2guard.HeldMetricName, held)
			}
			// The connection made before the trip is not held and still
			// speaks HTTP/2.
			if _, err := io.WriteString(early, http2.ClientPreface); err != nil {
				t.Fatal(err)
			}
			fr := http2.NewFramer(early, early)
			if err := fr.WriteSettings(); err != nil {
				t.Fatal(err)
			}
			_ = early.SetReadDeadline(time.Now().Add(5 * time.Second))
			if f, err := fr.ReadFrame(); err != nil {
				t.Errorf("the connection made before the trip: %v", err)
			} else if _, ok := f.(*http2.SettingsFrame); !ok {
				t.Errorf("the connection made before the trip read %v first, want SETTINGS", f)
			}
		})
	}
}
