package main

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/transport/tlsconf"
)

func TestEveryCallsAtOnceAndEveryPeriodUntilInterrupted(t *testing.T) {
	var calls atomic.Int32
	reached := make(chan struct{})
	c := every("test", time.Millisecond, func() {
		if calls.Add(1) == 3 {
			close(reached)
		}
	})
	done := make(chan error, 1)
	go func() { done <- c.execute() }()
	select {
	case <-reached:
	case <-time.After(5 * time.Second):
		t.Fatalf("%d calls after 5s, want 3", calls.Load())
	}
	c.interrupt(t.Context())
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	n := calls.Load()
	time.Sleep(10 * time.Millisecond) // no call after the interrupt
	if calls.Load() != n {
		t.Errorf("called after the interrupt: %d, then %d", n, calls.Load())
	}
}

func TestGRPCStreamsNeverWrapsToNoLimit(t *testing.T) {
	for _, c := range []struct {
		n    int
		want uint32
	}{{1024, 1024}, {1, 1}, {1 << 32, 1<<32 - 1}, {1<<32 + 5, 1<<32 - 1}} {
		if got := grpcStreams(c.n); got != c.want {
			t.Errorf("grpcStreams(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}

func TestTLSClientAuthIsTheConfigsModeForTLSConf(t *testing.T) {
	for c, want := range map[conf.ClientAuth]tlsconf.ClientAuth{conf.ClientAuthNone: tlsconf.ClientAuthNone,
		conf.ClientAuthRequest: tlsconf.ClientAuthRequest, conf.ClientAuthRequire: tlsconf.ClientAuthRequire} {
		if got := tlsClientAuth(c); got != want {
			t.Errorf("%s: got %q, want %q", c, got, want)
		}
	}
	// A value no constant has fails tlsconf.New, not open to anyone.
	if m, err := tlsconf.ParseClientAuth(string(tlsClientAuth(conf.ClientAuth(3)))); err == nil {
		t.Errorf("conf.ClientAuth(3) is mode %q", m)
	}
}
