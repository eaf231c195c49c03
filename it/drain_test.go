package it

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// silentBroker listens on a loopback port, accepts every connection and
// never answers: a Kafka broker that is reachable but does not speak. It
// closes its listener and the connections when the test ends.
func silentBroker(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestSIGTERMWithASilentKafkaBrokerLeavesTheAuditTrailItsShare runs grove
// with a prediction log whose Kafka broker accepts connections and never
// answers, and a 6 s drain_timeout; it scores (so the prediction log has
// events it cannot deliver), makes a management write (so the audit trail
// has an object), and sends SIGTERM. The prediction log's flush may not
// take the whole drain_timeout: grove exits within drain_timeout and a
// margin, the audit trail closes within its share (no "left unwritten"
// warning), and the audit object is in the bucket.
//
// It runs alone (no t.Parallel): it times the shutdown. Budget: 15 s.
func TestSIGTERMWithASilentKafkaBrokerLeavesTheAuditTrailItsShare(t *testing.T) {
	const drain = 6 * time.Second
	b, _ := logBucket(t)
	g := startGrove(t, b.URL(), nil, append(writeServerConfig(t, kafkaConfig(silentBroker(t), "proto", "")), "--drain-timeout", drain.String())...)

	exp := loadExpected(t)
	body := batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/"))
	for i := range 3 {
		if code, _, resp := post(t, g, body, nil); code != http.StatusOK || !matches(exp, "pctr_v1", resp, 0) {
			t.Fatalf("request %d: HTTP %d %+v", i, code, resp)
		}
	}
	if code, raw := g.as(anonymous, "POST", "/contract/ads/pctr/1", `{"router": {"LatestPhaseInPctBasedRouter": {}}}`); code != http.StatusOK {
		t.Fatalf("POST /contract/ads/pctr/1: HTTP %d %s", code, raw)
	}
	if s := g.logStats(); s.Delivered != 0 || s.Buffered == 0 {
		t.Fatalf("prediction log before SIGTERM: %+v; want events buffered, none delivered", s)
	}

	start := time.Now()
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	const margin = 5 * time.Second
	select {
	case err := <-g.done:
		g.done <- err
		if err != nil {
			t.Errorf("grove exited with %v after SIGTERM", err)
		}
	case <-time.After(drain + margin):
		t.Fatalf("grove did not exit within drain_timeout %v + %v of SIGTERM", drain, margin)
	}
	took := time.Since(start)
	logs := g.logs.String()
	t.Logf("exited %v after SIGTERM (drain_timeout %v)", took, drain)
	if strings.Contains(logs, "left unwritten") || strings.Contains(logs, "closing the audit trail") {
		t.Errorf("the audit trail did not get its share of drain_timeout:\n%s", logs)
	}
	if n := auditObjects(t, b); n != 1 {
		t.Errorf("%d audit objects in the bucket, want 1 (the management write's)", n)
	}
}
