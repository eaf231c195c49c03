// Package etcdtest starts a throwaway single-member etcd server (Debian's
// etcd-server package, the etcd binary on PATH) on loopback for the tests
// of the cluster packages: ports chosen at run time, a temporary data
// directory, killed when the test ends. Nothing in it is for production.
package etcdtest

import (
	"bytes"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groveml/grove/internal/tiedproc"
)

// Server is a running etcd.
type Server struct {
	// Endpoint is the client URL, http://127.0.0.1:port (https with TLS).
	Endpoint string
	// Addr is the client host:port.
	Addr string
	cmd  *exec.Cmd
	out  *lockedBuffer
	done chan struct{}
	once sync.Once
}

// TLSFiles are the PEM files of a server that takes TLS clients only and
// requires a client certificate signed by ClientCAFile.
type TLSFiles struct {
	CertFile, KeyFile, ClientCAFile string
}

// Option configures Start.
type Option func(*options)

type options struct{ tls *TLSFiles }

// WithTLS serves clients over TLS with the given files, and requires
// their certificates.
func WithTLS(f TLSFiles) Option { return func(o *options) { o.tls = &f } }

// Start starts etcd and waits until it serves clients (at most 20 s). It
// fails the test when the binary is missing, naming the package to
// install; the server is killed when the test ends, or when Stop is called.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatalf("the etcd binary is not on PATH (%v): `make deps` installs Debian's etcd-server", err)
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	var lastErr error
	for range 3 { // a chosen port may be taken before etcd binds it
		s, err := start(t, bin, o)
		if err == nil {
			return s
		}
		lastErr = err
	}
	t.Fatalf("starting etcd: %v", lastErr)
	return nil
}

// start makes one attempt at starting etcd.
func start(t testing.TB, bin string, o options) (*Server, error) {
	client, err := freePort()
	if err != nil {
		return nil, err
	}
	peer, err := freePort()
	if err != nil {
		return nil, err
	}
	scheme := "http"
	if o.tls != nil {
		scheme = "https"
	}
	clientURL := fmt.Sprintf("%s://127.0.0.1:%d", scheme, client)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
	args := []string{
		"--name", "etcdtest", "--data-dir", t.TempDir(),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "etcdtest=" + peerURL, "--initial-cluster-state", "new",
		// A fast election for a quick start; the shortest lease etcd grants
		// stays 1 s (1.5 election timeouts, rounded up).
		"--heartbeat-interval", "20", "--election-timeout", "200",
		"--logger", "zap", "--log-outputs", "stderr",
	}
	if o.tls != nil {
		args = append(args, "--cert-file", o.tls.CertFile, "--key-file", o.tls.KeyFile,
			"--trusted-ca-file", o.tls.ClientCAFile, "--client-cert-auth")
	}
	s := &Server{Endpoint: clientURL, Addr: fmt.Sprintf("127.0.0.1:%d", client), out: &lockedBuffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout, s.cmd.Stderr = s.out, s.out
	waited, err := tiedproc.Start(s.cmd)
	if err != nil {
		return nil, fmt.Errorf("running %s: %w", bin, err)
	}
	go func() { <-waited; close(s.done) }()
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			t.Logf("etcd output:\n%s", s.out.String())
		}
	})
	deadline := time.After(20 * time.Second)
	// etcd serves clients once it has joined its cluster and logs so:
	// "serving client traffic securely" or "... insecurely".
	for !strings.Contains(s.out.String(), "serving client traffic") {
		select {
		case <-s.done:
			return nil, fmt.Errorf("etcd exited before serving: %s", tail(s.out.String()))
		case <-deadline:
			s.Stop()
			return nil, fmt.Errorf("etcd did not serve within 20s: %s", tail(s.out.String()))
		case <-time.After(20 * time.Millisecond):
		}
	}
	return s, nil
}

// Freeze stops the server's process without closing its connections, as a
// network partition or a stalled disk would look to its clients: requests
// and watches wait, unanswered. Stop still kills it.
func (s *Server) Freeze(t testing.TB) {
	t.Helper()
	if err := freeze(s.cmd.Process); err != nil {
		t.Fatal(err)
	}
}

// Stop kills the server and waits for it to exit; later calls do nothing.
func (s *Server) Stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
	})
}

// Output returns what the server printed so far.
func (s *Server) Output() string { return s.out.String() }

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("choosing a port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// tail returns the last lines of etcd's output, for an error.
func tail(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-5):], "\n")
}

// lockedBuffer is a bytes.Buffer the process writes while tests read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
