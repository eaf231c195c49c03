package it

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// One caller keeping 48 slow requests in flight does not starve another:
// with auth.max_inflight_per_identity at 4, the quiet caller's slowest
// request while the noisy caller floods the one model stays within a
// bound of its slowest alone (twice it, plus the time of eight calls of
// the model: without the limit it waits behind about 48, 2.4 s), and the noisy
// caller's excess is answered 429 with Retry-After, naming the limit.
// It runs alone (no t.Parallel): it measures latency. Budget: 20 s.
func TestNoisyCallerDoesNotStarveAnotherPastItsRequestsInFlight(t *testing.T) {
	const (
		delay = 50 * time.Millisecond // one call of the model
		noisy = 48
	)
	b := newDirBucket(t)
	b.Put(t, "slow/model.faulty", []byte(fmt.Sprintf(`{"delay_ms": %d}`, delay.Milliseconds())))
	putConfig(t, b, modelEntry{Path: "slow/"})
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	writeTokens(t, tokens)
	g := startGrove(t, b.URL(), nil, "--auth-tokens-file", tokens, "--max-batch-rows", "1",
		"--auth-max-inflight-per-identity", "4")
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: noisy + 4}, Timeout: 30 * time.Second}
	body := batchJSON(itemJSON("slow/", tensorJSON("INT32", []int64{1}, []float64{1})))
	call := func(ctx context.Context, token string) (int, http.Header, string, time.Duration, error) {
		req, err := http.NewRequestWithContext(ctx, "POST", g.url+"/v1/inference", strings.NewReader(body))
		if err != nil {
			return 0, nil, "", 0, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		start := time.Now()
		resp, err := c.Do(req)
		if err != nil {
			return 0, nil, "", 0, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b), time.Since(start), nil
	}
	quiet := func(n int) time.Duration { // the quiet caller's slowest of n, one at a time
		var top time.Duration
		for i := range n {
			code, _, b, took, err := call(context.Background(), tokenOf["infer"])
			if err != nil || code != http.StatusOK || strings.Contains(b, "error_type") {
				t.Fatalf("quiet request %d: %v HTTP %d %s", i+1, err, code, b)
			}
			top = max(top, took)
		}
		return top
	}
	quiet(5) // warm up
	alone := quiet(20)

	ctx, stop := context.WithCancel(context.Background())
	var (
		wg        sync.WaitGroup
		ok, over  atomic.Int64
		mu        sync.Mutex
		refusals  []string
		badAnswer atomic.Value
	)
	for range noisy {
		wg.Go(func() {
			for ctx.Err() == nil {
				code, hdr, b, _, err := call(ctx, "tok-limited-005") // the noisy caller (no rate limit here)
				switch {
				case ctx.Err() != nil:
				case err != nil:
					badAnswer.Store(err.Error())
				case code == http.StatusOK:
					ok.Add(1)
				case code == http.StatusTooManyRequests:
					over.Add(1)
					mu.Lock()
					if len(refusals) < 3 {
						refusals = append(refusals, fmt.Sprintf("Retry-After %q: %s", hdr.Get("Retry-After"), b))
					}
					mu.Unlock()
					time.Sleep(delay) // a client that waits a little, not a spin
				default:
					badAnswer.Store(fmt.Sprintf("HTTP %d %s", code, b))
				}
			}
		})
	}
	time.Sleep(500 * time.Millisecond) // the flood is on
	busy := quiet(20)
	stop()
	wg.Wait()

	bound := 2*alone + 8*delay
	t.Logf("quiet caller's slowest of 20: %v alone, %v beside the noisy one (bound %v); noisy caller: %d served, %d refused 429",
		alone, busy, bound, ok.Load(), over.Load())
	if busy > bound {
		t.Errorf("the quiet caller's slowest request took %v beside a noisy caller with %d in flight, past the bound %v (%v alone)", busy, noisy, bound, alone)
	}
	if v := badAnswer.Load(); v != nil {
		t.Errorf("a noisy request was answered neither 200 nor 429: %v", v)
	}
	if over.Load() == 0 {
		t.Fatal("the noisy caller with 48 in flight was never refused")
	}
	for _, r := range refusals {
		if !strings.HasPrefix(r, `Retry-After "1"`) || !strings.Contains(r, `token:limited\" has 4 requests in flight`) ||
			!strings.Contains(r, "auth.max_inflight_per_identity") {
			t.Errorf("refusal %s: want Retry-After 1 and a message naming the caller and auth.max_inflight_per_identity", r)
		}
	}
}
