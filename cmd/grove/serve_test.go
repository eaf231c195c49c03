package main

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/groveml/grove/api/sidecar/sidecarpb"
	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/transport/grpcserver"
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

func TestGRPCOptionsKeepModelWritesOnTheGRPCListenerOnlyInTheSidecarLayout(t *testing.T) {
	register, del := sidecarpb.InferenceService_RegisterModel_FullMethodName, sidecarpb.InferenceService_DeleteModel_FullMethodName
	base := conf.DefaultServer()
	base.MaxBodyBytes, base.MaxModelBytes = 1<<20, 1<<30

	// Loopback without authentication: today's limits, both methods here.
	public, admin := grpcOptions(base, grpcserver.Options{})
	if public.MaxMessageBytes != 1<<20 || public.MethodMaxMessageBytes[register] != 1<<30 || len(public.ServedElsewhere) != 0 {
		t.Errorf("sidecar layout: public options %+v, want max_body_bytes, RegisterModel at max_model_bytes, nothing elsewhere", public)
	}
	if admin.MaxMessageBytes != 1<<30 {
		t.Errorf("admin limit %d, want max_model_bytes", admin.MaxMessageBytes)
	}
	if w := modelWritesWhere(base); w != "here" {
		t.Errorf("sidecar layout: model writes %q", w)
	}

	// Authentication on: max_body_bytes for every method, the two refused.
	authed := base
	authed.Auth.TokensFile = "/t.yaml"
	public, _ = grpcOptions(authed, grpcserver.Options{})
	if public.MaxMessageBytes != 1<<20 || len(public.MethodMaxMessageBytes) != 0 || len(public.ServedElsewhere) != 2 {
		t.Fatalf("with authentication: public options %+v, want max_body_bytes alone and two methods elsewhere", public)
	}
	for _, m := range []string{register, del} {
		if msg := public.ServedElsewhere[m]; !strings.Contains(msg, "admin gRPC listener, which is off: set admin_grpc (--admin-grpc)") {
			t.Errorf("without admin_grpc, %s is refused with %q", m, msg)
		}
	}
	if w := modelWritesWhere(authed); w != "nowhere: set admin_grpc" {
		t.Errorf("with authentication, no admin_grpc: model writes %q", w)
	}
	authed.AdminGRPC = "10.0.0.1:9091"
	public, _ = grpcOptions(authed, grpcserver.Options{})
	if msg := public.ServedElsewhere[register]; !strings.Contains(msg, "RegisterModel is served on the admin gRPC listener, admin_grpc (--admin-grpc) 10.0.0.1:9091") {
		t.Errorf("with admin_grpc, RegisterModel is refused with %q", msg)
	}

	// Not loopback, without authentication (insecure_no_auth): refused too.
	open := base
	open.GRPC, open.InsecureNoAuth = "0.0.0.0:9090", true
	if public, _ = grpcOptions(open, grpcserver.Options{}); len(public.ServedElsewhere) != 2 || len(public.MethodMaxMessageBytes) != 0 {
		t.Errorf("on every interface: public options %+v, want the model writes elsewhere", public)
	}
}
