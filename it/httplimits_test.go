package it

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/groveml/grove/internal/rawhttptest"
)

// dialHTTP opens a raw connection to g's HTTP listener.
func dialHTTP(t *testing.T, g *grove) *rawhttptest.RawConn {
	t.Helper()
	return rawhttptest.DialRaw(t, strings.TrimPrefix(g.url, "http://"))
}

// rawPost is a POST of body to path with token (none if "") and the extra
// header lines given ("Name: value").
func rawPost(path, token, body string, headers ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "POST %s HTTP/1.1\r\nHost: grove\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", path, len(body))
	if token != "" {
		fmt.Fprintf(&b, "Authorization: Bearer %s\r\n", token)
	}
	for _, h := range headers {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("\r\n" + body)
	return b.String()
}

// startAuthGrove runs grove on b with the test's tokens (authTokens) and
// the token "limited" allowed one request, plus args.
func startAuthGrove(t *testing.T, b *dirBucket, args ...string) *grove {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	writeTokens(t, tokens)
	cfg := filepath.Join(t.TempDir(), "grove.yaml")
	if err := os.WriteFile(cfg, []byte("auth:\n  limits:\n    - {name: limited, rps: 0.001, burst: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return startGrove(t, b.URL(), nil, append([]string{"--config", cfg, "--auth-tokens-file", tokens}, args...)...)
}

// TestHTTPRefusalsCloseTheConnectionButAFullQueueDoesNot: 401, 403 and
// the per-identity limit's 429 carry Connection: close and the server
// closes the connection; a full model queue's 429 keeps it for the
// client's retry. On the same server, two Grove-Timeout headers get a 400
// naming the header, and a request with both Content-Length and
// Transfer-Encoding closes its connection after its answer (what follows
// its chunked body is never read as a request). Budget: 15 s.
func TestHTTPRefusalsCloseTheConnectionButAFullQueueDoesNot(t *testing.T) {
	t.Parallel()
	b := newDirBucket(t)
	b.Put(t, "slow/model.faulty", []byte(`{"delay_ms": 1000}`))
	putConfig(t, b, modelEntry{Path: "slow/"})
	g := startAuthGrove(t, b, "--model-queue-size", "1")
	body := batchJSON(itemJSON("slow/", tensorJSON("INT32", []int64{1}, []float64{1})))

	// The limited caller spends its one request (on a cheap route).
	if code, msg, _ := g.authCall("GET", "/v1/status", "tok-limited-005"); code != 200 {
		t.Fatalf("the limited caller's first request: %d %s", code, msg)
	}
	for _, tc := range []struct {
		why, token string
		code       int
	}{
		{"no credentials", "", 401},
		{"a wrong token", "tok-nope-00000", 401},
		{"a token without infer", "tok-read-0002", 403},
		{"a caller over its limit", "tok-limited-005", 429},
	} {
		c := dialHTTP(t, g)
		c.Send(rawPost("/v1/inference", tc.token, body))
		resp, msg, err := c.Answer(5 * time.Second)
		if err != nil {
			t.Fatalf("%s: %v", tc.why, err)
		}
		if resp.StatusCode != tc.code || !resp.Close { // Close: the answer said Connection: close
			t.Errorf("%s: %d closing %v, want %d with Connection: close (%s)", tc.why, resp.StatusCode, resp.Close, tc.code, msg)
		}
		if !c.ClosedWithin(3 * time.Second) {
			t.Errorf("%s: the server kept the connection after the refusal", tc.why)
		}
	}

	// A full model queue: one request runs, one waits, the next is
	// refused with a 429 that keeps its connection.
	var occupy workers
	occupy.start(3, func(int, int) { _, _, _ = g.authCallBody("POST", "/v1/inference", "tok-infer-0001", body) })
	defer occupy.finish()
	c := dialHTTP(t, g)
	full := false
	for attempt := 0; attempt < 10 && !full; attempt++ {
		time.Sleep(100 * time.Millisecond)
		c.Send(rawPost("/v1/inference", "tok-infer-0001", body))
		resp, msg, err := c.Answer(10 * time.Second)
		if err != nil {
			t.Fatalf("a request while the queue is full: %v", err)
		}
		if resp.Close {
			t.Fatalf("an answer %d %s closed the connection", resp.StatusCode, msg)
		}
		full = resp.StatusCode == http.StatusTooManyRequests && strings.Contains(msg, "overloaded")
	}
	occupy.finish()
	if !full {
		t.Fatal("no queue-full 429 in 10 attempts")
	}
	c.Send("GET /healthz HTTP/1.1\r\nHost: grove\r\n\r\n")
	if resp, msg, err := c.Answer(5 * time.Second); err != nil || resp.StatusCode != 200 {
		t.Errorf("the connection after a queue-full 429: %v %v %s", resp, err, msg)
	}

	// Two Grove-Timeout headers.
	c = dialHTTP(t, g)
	c.Send(rawPost("/v1/inference", "tok-infer-0001", body, "Grove-Timeout: 5s", "Grove-Timeout: 10m"))
	if resp, msg, err := c.Answer(5 * time.Second); err != nil || resp.StatusCode != 400 || !strings.Contains(msg, "Grove-Timeout") {
		t.Errorf("two Grove-Timeout headers: %v %v %s, want a 400 naming the header", resp, err, msg)
	}

	// Content-Length and Transfer-Encoding together, then a request
	// smuggled after the chunked body.
	c = dialHTTP(t, g)
	c.Send(fmt.Sprintf("POST /v1/inference HTTP/1.1\r\nHost: grove\r\nAuthorization: Bearer tok-infer-0001\r\nContent-Length: 5\r\n"+
		"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: grove\r\n\r\n", len(body), body))
	resp, msg, err := c.Answer(10 * time.Second)
	if err != nil || resp.StatusCode != 200 || !resp.Close {
		t.Fatalf("a request with Content-Length and Transfer-Encoding: %v %v %s, want 200 with Connection: close", resp, err, msg)
	}
	if resp, _, err := c.Answer(2 * time.Second); err == nil {
		t.Errorf("the bytes after the chunked body were answered as a request: %d", resp.StatusCode)
	}
}

// authCallBody is authCall with a body.
func (g *grove) authCallBody(method, path, token, body string) (int, string, error) {
	req, err := http.NewRequest(method, g.url+path, strings.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// TestHTTPSlowBodyWithoutCredentialsIsRefusedAtOnce: a request without a
// token that declares a 200 KiB body and sends it a byte every 50 ms gets
// its 401 at once, not after its body (or the 1 min read timeout), and
// its connection is closed at the short read deadline of a caller not
// known yet (http_read_header_timeout, 2 s here). The baseline is the
// same 401 without a body, taken in the test. Budget: 10 s.
func TestHTTPSlowBodyWithoutCredentialsIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	b := newDirBucket(t)
	b.Put(t, "model_config.json", []byte(`{"model_metadata": []}`))
	g := startAuthGrove(t, b, "--http-read-header-timeout", "2s")

	c := dialHTTP(t, g)
	start := time.Now()
	c.Send(rawPost("/v1/inference", "", ""))
	if resp, _, err := c.Answer(10 * time.Second); err != nil || resp.StatusCode != 401 {
		t.Fatalf("a 401 without a body: %v %v", resp, err)
	}
	baseline := time.Since(start)

	c = dialHTTP(t, g)
	start = time.Now()
	c.Send(fmt.Sprintf("POST /v1/inference HTTP/1.1\r\nHost: grove\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", 200<<10))
	stop := make(chan struct{})
	defer close(stop)
	go func(c *rawhttptest.RawConn) {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}(c)
	resp, msg, err := c.Answer(10 * time.Second)
	took := time.Since(start)
	if err != nil || resp.StatusCode != 401 {
		t.Fatalf("a trickled body without credentials: %v %v %s", resp, err, msg)
	}
	if limit := max(time.Second, 10*baseline); took > limit {
		t.Errorf("the 401 took %v (without a body: %v), want under %v: it waited for the body", took, baseline, limit)
	}
	if !resp.Close {
		t.Error("the 401 does not close the connection")
	}
	if !c.ClosedWithin(8 * time.Second) {
		t.Error("the refused connection still trickling its body was not closed")
	} else if d := time.Since(start); d > 6*time.Second {
		t.Errorf("the refused connection closed after %v, want about the 2 s read deadline of an unknown caller", d)
	}
}

// TestHTTPUrllibSendingA70MiBBodyReadsThe413: Python's urllib sends its
// whole body before it reads the answer; a body over max_body_bytes is
// answered 413 from its Content-Length and drained (up to four times the
// limit), so urllib reads the 413 rather than a connection reset. The
// limit is 20 MiB here, so that the 50 MiB left unread once the limit is
// reached are more than loopback's socket buffers hold. Budget: 15 s.
func TestHTTPUrllibSendingA70MiBBodyReadsThe413(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	b := newDirBucket(t)
	b.Put(t, "model_config.json", []byte(`{"model_metadata": []}`))
	g := startGrove(t, b.URL(), nil, "--max-body-bytes", strconv.Itoa(20<<20))
	script := `
import sys, urllib.request, urllib.error
data = b" " * (70 << 20)
req = urllib.request.Request(sys.argv[1] + "/v1/inference", data=data, method="POST", headers={"Content-Type": "application/json"})
try:
    with urllib.request.urlopen(req, timeout=30) as r:
        print("status", r.status)
except urllib.error.HTTPError as e:
    print("status", e.code, e.read().decode(errors="replace"))
except Exception as e:
    print("error", type(e).__name__, e)
`
	out, err := exec.Command("/usr/bin/python3", "-c", script, g.url).CombinedOutput()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "status 413 ") || !strings.Contains(string(out), "exceeds the limit") {
		t.Errorf("urllib sending 70 MiB: %s, want status 413", out)
	}
}

// TestHTTPIdleConnectionsLeaveAProbeAndACallerAnswering: 5,000 connections
// that send nothing, against a grove limited to 4,096 file descriptors
// (so that its default http_max_connections, 1,728 from the formula of
// conf.DefaultConnectionLimits, is below 5,000), leave /healthz and an
// authenticated caller answering: the idle connections are closed to make
// room, counted in grove_connections_reclaimed_total. Without a limit,
// grove runs out of descriptors and the probe waits in the kernel's
// queue. Budget: 20 s.
func TestHTTPIdleConnectionsLeaveAProbeAndACallerAnswering(t *testing.T) {
	t.Parallel()
	const idle = 5000
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
	}
	if lim.Cur < idle+1024 {
		t.Skipf("RLIMIT_NOFILE is %d: the test needs %d descriptors", lim.Cur, idle+1024)
	}
	// grove runs with 4,096 descriptors (soft and hard, so that Go does
	// not raise it).
	wrapper := filepath.Join(t.TempDir(), "grove-4096")
	if err := os.WriteFile(wrapper, []byte("#!/bin/sh\nulimit -n 4096 || exit 1\nexec \"$GROVE_BIN\" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	b := newDirBucket(t)
	b.Put(t, "model_config.json", []byte(`{"model_metadata": []}`))
	tokens := filepath.Join(t.TempDir(), "tokens.yaml")
	writeTokens(t, tokens)
	g := startBinary(t, wrapper, "", append(os.Environ(), "GROVE_BIN="+groveBin), b.URL(), "--auth-tokens-file", tokens)
	addr := strings.TrimPrefix(g.url, "http://")

	conns := make([]net.Conn, 0, idle)
	var mu sync.Mutex
	var wg sync.WaitGroup
	dialed := make(chan struct{}, 64) // at most 64 dials at once
	for range idle {
		wg.Add(1)
		dialed <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-dialed }()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	if len(conns) < idle/2 {
		t.Fatalf("only %d of %d connections opened", len(conns), idle)
	}
	// A fresh connection per request, as a probe makes.
	fresh := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	probe := func(path, token string) (int, string, error) {
		req, _ := http.NewRequest("GET", g.url+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := fresh.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	if code, _, err := probe("/healthz", ""); code != 200 {
		t.Fatalf("/healthz with %d idle connections: %d %v", len(conns), code, err)
	}
	code, metrics, err := probe("/metrics", "tok-read-0002")
	if code != 200 {
		t.Fatalf("an authenticated caller with %d idle connections: %d %v", len(conns), code, err)
	}
	gauge := func(name string) float64 {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+`{listener="http"}`) + ` (\S+)$`).FindStringSubmatch(metrics)
		if m == nil {
			t.Fatalf("no %s for the http listener in /metrics", name)
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	if open, reclaimed := gauge("grove_connections_open"), gauge("grove_connections_reclaimed_total"); open > 1728 || reclaimed < idle-1728 {
		t.Errorf("grove holds %v connections and reclaimed %v; want at most 1728 held and at least %d reclaimed", open, reclaimed, idle-1728)
	}
}
