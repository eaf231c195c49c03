package etcdtest

import (
	"fmt"
	"net"
	"runtime"
	"strings"
	"testing"
)

// recorder catches a Fatalf instead of failing the test.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestStartWithoutTheBinaryNamesThePackage(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); Start(r) }()
	<-done
	if !strings.Contains(r.msg, "`make deps` installs Debian's etcd-server") {
		t.Errorf("message %q does not say how to install etcd", r.msg)
	}
}

func TestStartServesAndStops(t *testing.T) {
	s := Start(t)
	c, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	s.Stop()
	s.Stop() // twice is fine
	if c, err := net.Dial("tcp", s.Addr); err == nil {
		c.Close()
		t.Error("etcd still listens after Stop")
	}
}
