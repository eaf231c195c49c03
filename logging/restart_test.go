package logging

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// waitStats waits until cond holds of the producer's stats, failing the
// test after timeout.
func waitStats(t *testing.T, p *Producer, timeout time.Duration, what string, cond func(Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond(p.Stats()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %+v", what, timeout, p.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A broker that comes back without its data (a new topic id) while
// events keep coming: the producer makes the client forget the old topic
// once, and every event, those that failed on the old id and those logged
// meanwhile, is delivered; none fails because the producer purged it.
func TestProducerDeliversEveryEventLoggedAcrossABrokerRestart(t *testing.T) {
	emb := startEmbedded(t, "127.0.0.1:0")
	addr := emb.Addr()
	p := newProducer(t, kafkaConfig(addr))

	var logged atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				p.Log(event(g<<20|i), nil)
				logged.Add(1)
				time.Sleep(100 * time.Microsecond) // a steady flow, not a flood
			}
		})
	}
	waitStats(t, p, 10*time.Second, "first deliveries", func(s Stats) bool { return s.Delivered >= 200 })
	emb.Close()
	startEmbedded(t, addr) // the same address; it knows nothing of the old broker
	before := p.Stats().Delivered
	waitStats(t, p, 30*time.Second, "deliveries to the new broker", func(s Stats) bool { return s.Delivered >= before+3000 })
	close(stop)
	wg.Wait()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("flush: %v (%+v)", err, p.Stats())
	}
	if s := p.Stats(); s.Failed != 0 || s.Dropped != 0 || s.Delivered != logged.Load() || s.Buffered != 0 {
		t.Errorf("%d events logged: %+v", logged.Load(), s)
	}
}
