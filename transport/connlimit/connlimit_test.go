package connlimit

import (
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// limited listens on loopback with a limit of max and returns the
// listener, its metrics and a channel of the connections it accepts
// (accepted in a loop until the test ends).
func limited(t *testing.T, max int) (*Listener, *Metrics, chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(prometheus.NewRegistry())
	l := New(ln, Options{Name: "test", Max: max, Metrics: m, Logger: slog.New(slog.DiscardHandler)})
	accepted := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	t.Cleanup(func() { _ = l.Close() })
	return l, m, accepted
}

// dial connects to l and returns the client's end.
func dial(t *testing.T, l *Listener) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// next returns the next connection l accepted.
func next(t *testing.T, accepted chan net.Conn) *Conn {
	t.Helper()
	select {
	case c := <-accepted:
		return c.(*Conn)
	case <-time.After(5 * time.Second):
		t.Fatal("no connection accepted within 5s")
		return nil
	}
}

// closedByServer reports whether the server closed the client's end c
// (a read ends with EOF or a reset within 300 ms: the close is sent before Accept returns the connection that made it).
func closedByServer(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return err != nil && !(errors.As(err, &ne) && ne.Timeout())
}

func TestAConnectionOverTheLimitIsClosedAtOnceAndCounted(t *testing.T) {
	l, m, accepted := limited(t, 2)
	c1, c2 := dial(t, l), dial(t, l)
	s1, _ := next(t, accepted), next(t, accepted)
	over := dial(t, l)
	if !closedByServer(over) {
		t.Fatal("the third connection of a listener limited to 2 is still open")
	}
	if got := testutil.ToFloat64(m.refused.WithLabelValues("test")); got != 1 {
		t.Errorf("refused = %v, want 1", got)
	}
	if closedByServer(c1) || closedByServer(c2) {
		t.Error("a connection within the limit was closed")
	}
	// Closing one makes room for the next.
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	_ = s1.Close() // counted once
	dial(t, l)
	next(t, accepted)
	if got := testutil.ToFloat64(m.open.WithLabelValues("test")); got != 2 || l.Open() != 2 {
		t.Errorf("open = %v (gauge), %d (Open), want 2", got, l.Open())
	}
}

func TestAtTheLimitTheLongestIdleConnectionMakesRoom(t *testing.T) {
	l, m, accepted := limited(t, 3)
	c1, c2, c3 := dial(t, l), dial(t, l), dial(t, l)
	s1, s2, s3 := next(t, accepted), next(t, accepted), next(t, accepted)
	s2.SetIdle(true)
	s1.SetIdle(true)
	s3.SetIdle(true)
	s3.SetIdle(false) // busy again
	dial(t, l)
	next(t, accepted)
	if !closedByServer(c2) {
		t.Fatal("the connection idle the longest was not closed to make room")
	}
	if closedByServer(c1) || closedByServer(c3) {
		t.Fatal("a connection idle for less long, or busy, was closed")
	}
	dial(t, l)
	next(t, accepted)
	if !closedByServer(c1) {
		t.Fatal("the next idle connection was not closed to make room")
	}
	// None idle now: the next one is refused.
	if over := dial(t, l); !closedByServer(over) {
		t.Fatal("a connection over the limit with none idle is open")
	}
	if closedByServer(c3) {
		t.Fatal("the busy connection was closed")
	}
	if r, f := testutil.ToFloat64(m.reclaimed.WithLabelValues("test")), testutil.ToFloat64(m.refused.WithLabelValues("test")); r != 2 || f != 1 {
		t.Errorf("reclaimed %v, refused %v; want 2 and 1", r, f)
	}
	if l.Open() != 3 {
		t.Errorf("Open() = %d, want 3", l.Open())
	}
	// The server closing a reclaimed connection again counts nothing.
	_ = s1.Close()
	_ = s2.Close()
	if l.Open() != 3 {
		t.Errorf("after closing reclaimed connections again: Open() = %d, want 3", l.Open())
	}
}

func TestAHeldIdleConnectionIsNotClosedToMakeRoom(t *testing.T) {
	l, _, accepted := limited(t, 2)
	c1, c2 := dial(t, l), dial(t, l)
	s1, s2 := next(t, accepted), next(t, accepted)
	s1.SetIdle(true) // an HTTP/2 connection: idle to its server's hooks,
	s1.Hold()        // with a stream in flight
	s2.SetIdle(true)
	dial(t, l)
	next(t, accepted)
	if !closedByServer(c2) || closedByServer(c1) {
		t.Fatal("want the idle connection without a request closed, and the held one open")
	}
	if over := dial(t, l); !closedByServer(over) {
		t.Fatal("with only a held connection idle, a new one over the limit is open")
	}
	s1.Release()
	dial(t, l)
	next(t, accepted)
	if !closedByServer(c1) {
		t.Fatal("released, the idle connection was not closed to make room")
	}
}

func TestWithoutALimitConnectionsAreOnlyCounted(t *testing.T) {
	l, m, accepted := limited(t, 0)
	for range 5 {
		dial(t, l)
		next(t, accepted)
	}
	if got := testutil.ToFloat64(m.open.WithLabelValues("test")); got != 5 {
		t.Errorf("open = %v, want 5", got)
	}
}

func TestFindSeesThroughWrappers(t *testing.T) {
	l, _, accepted := limited(t, 1)
	dial(t, l)
	s := next(t, accepted)
	if Find(s) != s {
		t.Error("Find of a *Conn is not itself")
	}
	if Find(tls.Server(s, &tls.Config{})) != s {
		t.Error("Find of a *tls.Conn over a *Conn is not the *Conn")
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if Find(a) != nil || Find(tls.Server(a, &tls.Config{})) != nil {
		t.Error("Find of a connection from no Listener is not nil")
	}
}

func TestCloseWriteHalfClosesTheConnection(t *testing.T) {
	l, _, accepted := limited(t, 1)
	c := dial(t, l)
	s := next(t, accepted)
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the client read %v after CloseWrite, want EOF", err)
	}
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatalf("the client cannot write after the server's CloseWrite: %v", err)
	}
}

// TestMarkingFromManyGoroutinesIsSafe runs with -race: connections marked
// idle and busy, held and closed while the listener reclaims. It waits
// until the listener has taken every one of the 100 connections (handed
// on, or closed at once), then until it holds none.
func TestMarkingFromManyGoroutinesIsSafe(t *testing.T) {
	l, m, accepted := limited(t, 8)
	var wg sync.WaitGroup
	var handed atomic.Int64
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case c, ok := <-accepted:
				if !ok {
					return
				}
				handed.Add(1)
				wg.Go(func() {
					lc := c.(*Conn)
					for i := range 50 {
						lc.SetIdle(i%2 == 0)
						lc.Hold()
						lc.Release()
					}
					_ = c.Close()
				})
			case <-stop:
				return
			}
		}
	})
	const n = 100
	var clients []net.Conn
	for range n {
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	refused := m.refused.WithLabelValues("test")
	deadline := time.Now().Add(10 * time.Second)
	for (handed.Load()+int64(testutil.ToFloat64(refused)) < n || l.Open() != 0) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	for _, c := range clients {
		_ = c.Close()
	}
	if got := handed.Load() + int64(testutil.ToFloat64(refused)); got != n {
		t.Errorf("the listener took %d of the %d connections (handed on or refused)", got, n)
	}
	if n := l.Open(); n != 0 {
		t.Errorf("Open() = %d after every connection closed, want 0", n)
	}
}
