package it

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/transport/h2guard/h2guardtest"
)

// TestRapidResetFloodGetsGoAwayAndSparesOtherCallers attacks Grove over
// TLS as CVE-2023-44487 does: several connections at once that open
// streams and reset each at once, without pause, each reconnecting as
// soon as the server closes it, on the gRPC listener (OIP ModelInfer)
// and on HTTP/2 over TLS. Every flood connection must get GOAWAY
// ENHANCE_YOUR_CALM and be closed, the closes must be counted in
// grove_http2_connections_closed_total, and another caller's OIP gRPC
// p99 latency during the gRPC flood rounds is compared with its value in
// the quiet rounds between them: within twice it when GROVE_IT_LATENCY is
// set, as make bench sets it on a machine of its own (make test runs other
// packages' tests beside this one, so there the figures are only logged).
// It runs alone (no t.Parallel): it measures latency. Budget: 25 s.
func TestRapidResetFloodGetsGoAwayAndSparesOtherCallers(t *testing.T) {
	s := newTLSSetup(t)
	b := newDirBucket(t)
	b.Put(t, "pctr_v1/model.pt", exampleModel(t, "pctr_v1"))
	putConfig(t, b, modelEntry{Path: "pctr_v1/"})
	addr, grpcAddr := freeAddr(t), freeAddr(t)
	g := runTLSGrove(t, "grove", addr, grpcAddr, []string{"serve", "--bucket", b.URL(), "--http", addr, "--grpc", grpcAddr,
		"--poll-interval", "1s", "--cache-dir", t.TempDir(), "--tls-cert", s.cert, "--tls-key", s.key})
	hc := s.client()
	g.waitFor("pctr_v1 to be ready over TLS", 60*time.Second, func() bool {
		code, _, _ := getWith(hc, g.url+"/v2/models/pctr_v1/ready")
		return code == http.StatusOK
	})

	oc := oippb.NewGRPCInferenceServiceClient(dialTLS(t, g, s.tlsConfig()))
	in := loadExpected(t)["pctr_v1"].Inputs[0]
	req := &oippb.ModelInferRequest{ModelName: "pctr_v1",
		Inputs:           []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: in.Shape}},
		RawInputContents: [][]byte{rawLE("FP32", in.Data)}}
	// sample adds the latencies of the caller's calls, one every 2 ms,
	// for d, to lat.
	sample := func(lat *[]time.Duration, d time.Duration) {
		t.Helper()
		for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			start := time.Now()
			_, err := oc.ModelInfer(ctx, req)
			cancel()
			if err != nil {
				t.Fatalf("the other caller's ModelInfer: %v", err)
			}
			*lat = append(*lat, time.Since(start))
		}
	}
	p99 := func(lat []time.Duration) time.Duration {
		slices.Sort(lat)
		return lat[len(lat)*99/100]
	}
	var warm []time.Duration
	sample(&warm, time.Second)

	// floods runs n flooders, each opening connection after connection
	// to addr (TLS, h2) until ctx is done, and returns their results.
	floods := func(ctx context.Context, n int, addr string, r h2guardtest.Request) []h2guardtest.Result {
		var (
			mu  sync.Mutex
			all []h2guardtest.Result
			wg  sync.WaitGroup
		)
		for range n {
			wg.Go(func() {
				for ctx.Err() == nil {
					cfg := s.tlsConfig()
					cfg.NextProtos = []string{"h2"}
					d := tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: cfg}
					c, err := d.DialContext(ctx, "tcp", addr)
					if err != nil {
						continue
					}
					res := h2guardtest.Flood(ctx, c, r, 0)
					mu.Lock()
					all = append(all, res)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		return all
	}
	checkClosed := func(what string, all []h2guardtest.Result) {
		t.Helper()
		closed := 0
		for _, res := range all {
			switch {
			case res.GoAway != nil && res.GoAway.Code == http2.ErrCodeEnhanceYourCalm:
				closed++
			case res.GoAway != nil:
				t.Errorf("%s: GOAWAY %v, want ENHANCE_YOUR_CALM", what, res.GoAway.Code)
			case errors.Is(res.ReadErr, os.ErrDeadlineExceeded):
				// stopped by the test while it flooded: not yet over budget, or never closed
			default:
				t.Errorf("%s: a connection of %d streams ended without GOAWAY after %v: %v", what, res.Streams, res.Elapsed, res.ReadErr)
			}
		}
		if closed == 0 {
			t.Errorf("%s: no flood connection got GOAWAY ENHANCE_YOUR_CALM (%d connections)", what, len(all))
		}
		t.Logf("%s: %d connections, %d closed with GOAWAY ENHANCE_YOUR_CALM", what, len(all), closed)
	}

	// Quiet and flooded rounds alternate, so that the load of the
	// machine's other work falls on both alike.
	// Each flood round runs flooders connections at once, each
	// reconnecting as soon as the server closes it.
	const (
		rounds   = 3
		flooders = 4
		round    = 1500 * time.Millisecond
	)
	var quietLat, loudLat []time.Duration
	var all []h2guardtest.Result
	for i := range rounds {
		var q, l []time.Duration
		sample(&q, round)
		ctx, cancel := context.WithTimeout(context.Background(), round)
		done := make(chan []h2guardtest.Result)
		go func() {
			done <- floods(ctx, flooders, grpcAddr, h2guardtest.Request{Path: "/inference.GRPCInferenceService/ModelInfer", GRPC: true})
		}()
		sample(&l, round)
		cancel()
		res := <-done
		all = append(all, res...)
		streams := 0
		for _, r := range res {
			streams += r.Streams
		}
		t.Logf("round %d: the other caller's p99 quiet %v, during the flood %v; %d flood connections, %d streams", i+1, p99(q), p99(l), len(res), streams)
		quietLat, loudLat = append(quietLat, q...), append(loudLat, l...)
	}
	checkClosed("gRPC flood", all)
	quiet, loud := p99(quietLat), p99(loudLat)
	t.Logf("the other caller's ModelInfer p99: quiet %v (%d calls), during the flood %v (%d calls)", quiet, len(quietLat), loud, len(loudLat))
	if loud > 2*quiet && os.Getenv("GROVE_IT_LATENCY") != "" {
		t.Errorf("the other caller's p99 rose from %v to %v during the flood, more than twice", quiet, loud)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	checkClosed("HTTP/2 over TLS flood", floods(ctx, flooders, addr, h2guardtest.Request{Method: "GET", Path: "/v2/models/pctr_v1"}))

	_, metrics, err := getWith(hc, g.url+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"grpc", "http"} {
		if !strings.Contains(metrics, `grove_http2_connections_closed_total{listener="`+l+`",reason="rapid_reset"}`) {
			t.Errorf("/metrics counts no rapid-reset close on listener %q", l)
		}
	}
}
