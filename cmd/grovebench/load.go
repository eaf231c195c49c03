package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// loadSpec is one closed-loop load run against one URL.
type loadSpec struct {
	url  string
	body []byte
	// contentType is the body's Content-Type (default application/json);
	// headers are extra header lines ("Grove-Timeout: 50ms").
	contentType string
	headers     []string
	// tlsConf is the client TLS configuration of an https url.
	tlsConf *tls.Config
	// okMarker must appear in a 200 response body, errMarker (if set) must
	// not; otherwise the request counts as an error.
	okMarker, errMarker []byte
	batch               int // rows per request, for rows/s
	conc                int
	warmup, duration    time.Duration
	timeout             time.Duration // per request
	// rate, when positive, paces the clients to rate requests per second in
	// all (each client one every conc/rate, staggered) instead of back to
	// back; a latency then counts from the request's scheduled start, so a
	// client that falls behind its schedule reports the delay (no
	// coordinated omission). conc stays the cap on requests in flight.
	rate float64
	// newCall, if set, replaces the HTTP request: each client calls it once
	// for its own call function (and its own connection, closed by the
	// returned func), which sends one request and checks the answer. The
	// call gets the run's context and keeps to spec.timeout itself.
	newCall func() (call func(context.Context) error, closeConn func(), err error)
	// requests, when positive, ends the run once that many requests were
	// started in all (warm-up included), even before the window ends.
	requests int64
}

// loadResult is what one load run measured.
type loadResult struct {
	// Requests is the number of successful requests that completed inside
	// the measured window; ReqPerSec is Requests per second of the window.
	Requests   int     `json:"requests"`
	ReqPerSec  float64 `json:"req_per_sec"`
	RowsPerSec float64 `json:"rows_per_sec"`
	// Errors counts failed requests over the whole run, warm-up included:
	// transport errors, non-200 answers and bodies without okMarker or with errMarker.
	Errors     int    `json:"errors"`
	FirstError string `json:"first_error,omitempty"`
	// Failures counts the Errors by kind (failureKind): "HTTP 504", "an
	// error in the body", "timeout", "transport".
	Failures map[string]int `json:"failures,omitempty"`
	// Sent is the number of requests that got an answer or failed over the
	// whole run, warm-up included (not those cut short by an interrupt):
	// what the server saw, to compare with its prediction log's counts.
	Sent int `json:"sent"`
	// Latency statistics over the successful requests that started inside
	// the window (so slow requests straddling its end are not dropped);
	// percentiles are nearest-rank over the sorted latencies.
	P50       time.Duration   `json:"p50_ns"`
	P99       time.Duration   `json:"p99_ns"`
	Mean      time.Duration   `json:"mean_ns"`
	Max       time.Duration   `json:"max_ns"`
	Latencies []time.Duration `json:"latencies_ns"`
}

// worker is one closed-loop client's private tally, merged after the run.
type worker struct {
	lats     []time.Duration
	done     int
	sent     int
	errors   int
	firstErr string
	failures map[string]int
	http     *rawClient                  // the client's connection, unless spec.newCall is set
	call     func(context.Context) error // from spec.newCall, if set
}

// runLoad drives spec.url with spec.conc goroutines, each sending requests
// back to back over its own keep-alive connection (a rawClient, or the
// connection of spec.newCall), for spec.warmup (not
// counted) plus spec.duration (measured). No request starts after the
// window ends; requests in flight then are waited for, bounded by
// spec.timeout, so the run always ends by warmup+duration+timeout. When ctx
// ends, in-flight requests are cancelled and the partial result returned.
func runLoad(ctx context.Context, spec loadSpec) loadResult {
	contentType := spec.contentType
	if contentType == "" {
		contentType = "application/json"
	}
	start := time.Now()
	winStart := start.Add(spec.warmup)
	winEnd := winStart.Add(spec.duration)
	workers := make([]*worker, spec.conc)
	var interval time.Duration
	if spec.rate > 0 {
		interval = max(time.Duration(float64(spec.conc)/spec.rate*1e9), 1)
	}
	var wg sync.WaitGroup
	var started atomic.Int64
	for i := range workers {
		w := &worker{lats: make([]time.Duration, 0, 4096)}
		workers[i] = w
		wg.Add(1)
		go func() {
			defer wg.Done()
			if spec.newCall != nil {
				call, closeConn, err := spec.newCall()
				if err != nil {
					w.errors++
					w.firstErr = err.Error()
					return
				}
				defer closeConn()
				w.call = call
			} else {
				c, err := newRawClient(spec.url, spec.body, contentType, spec.timeout, spec.headers...)
				if err == nil && c.tls && spec.tlsConf != nil {
					c.tlsConf = spec.tlsConf
				}
				if err != nil {
					w.errors++
					w.firstErr = err.Error()
					return
				}
				defer c.close()
				w.http = c
			}
			next := start.Add(interval * time.Duration(i) / time.Duration(spec.conc))
			for ctx.Err() == nil {
				t0 := time.Now()
				if interval > 0 {
					if !next.Before(winEnd) || !sleepUntil(ctx, next) {
						return
					}
					t0, next = next, next.Add(interval)
				}
				if !t0.Before(winEnd) || (spec.requests > 0 && started.Add(1) > spec.requests) {
					return
				}
				err := w.do(ctx, spec)
				t1 := time.Now()
				if err != nil {
					if ctx.Err() != nil {
						return // interrupted, not the server's fault
					}
					w.sent++
					w.errors++
					if w.firstErr == "" {
						w.firstErr = err.Error()
					}
					if w.failures == nil {
						w.failures = map[string]int{}
					}
					w.failures[failureKind(err)]++
					continue
				}
				w.sent++
				if !t0.Before(winStart) {
					w.lats = append(w.lats, t1.Sub(t0))
				}
				if !t1.Before(winStart) && t1.Before(winEnd) {
					w.done++
				}
			}
		}()
	}
	wg.Wait()

	var r loadResult
	for _, w := range workers {
		r.Latencies = append(r.Latencies, w.lats...)
		r.Requests += w.done
		r.Errors += w.errors
		r.Sent += w.sent
		r.Failures = addCounts(r.Failures, w.failures)
		if r.FirstError == "" {
			r.FirstError = w.firstErr
		}
	}
	r.ReqPerSec = float64(r.Requests) / spec.duration.Seconds()
	r.RowsPerSec = r.ReqPerSec * float64(spec.batch)
	r.summarize()
	return r
}

// do sends one request and checks the answer.
func (w *worker) do(ctx context.Context, spec loadSpec) error {
	if w.call != nil {
		return w.call(ctx)
	}
	status, body, err := w.http.do(ctx)
	if err != nil {
		return err
	}
	if status != 200 {
		return &statusError{code: status, body: clip(body, 200)}
	}
	if !bytes.Contains(body, spec.okMarker) || (len(spec.errMarker) > 0 && bytes.Contains(body, spec.errMarker)) {
		return fmt.Errorf("%w: %s", errBody, clip(body, 200))
	}
	return nil
}

// statusError is an answer whose HTTP status is not 200.
type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.code, e.body) }

// errBody is a 200 answer whose body is not a success.
var errBody = errors.New("error in the response body")

// failureKind is the kind of a failed request that Failures counts it
// under: its HTTP status, an error in the body, a timeout of the client,
// or another transport error.
func failureKind(err error) string {
	var se *statusError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("HTTP %d", se.code)
	case errors.Is(err, errBody):
		return "an error in the body"
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	default:
		return "transport"
	}
}

// addCounts adds the counts of from to to (made if nil) and returns it.
func addCounts(to, from map[string]int) map[string]int {
	for k, n := range from {
		if to == nil {
			to = map[string]int{}
		}
		to[k] += n
	}
	return to
}

// fmtCounts renders counts as "k1 ×n1, k2 ×n2", the largest first.
func fmtCounts(counts map[string]int) string {
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(a, b string) int {
		if c := cmp.Compare(counts[b], counts[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, counts[k])
	}
	return strings.Join(parts, ", ")
}

// summarize sorts the latencies and fills in the statistics.
func (r *loadResult) summarize() {
	slices.Sort(r.Latencies)
	n := len(r.Latencies)
	if n == 0 {
		return
	}
	var sum time.Duration
	for _, l := range r.Latencies {
		sum += l
	}
	r.Mean = sum / time.Duration(n)
	r.Max = r.Latencies[n-1]
	r.P50 = percentile(r.Latencies, 50)
	r.P99 = percentile(r.Latencies, 99)
}

// percentile returns the nearest-rank p-th percentile of sorted latencies:
// the smallest value with at least p% of the values at or below it.
func percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// rank = ceil(p/100 * n), computed in integers to avoid float rounding.
	rank := int((int64(p*1000)*int64(n) + 100000 - 1) / 100000)
	rank = max(1, min(rank, n))
	return sorted[rank-1]
}
