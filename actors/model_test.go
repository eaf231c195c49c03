package actors

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/servables"
)

// gated is a servable whose Predict blocks until the gate opens and records
// the first input value of each call in order.
type gated struct {
	gate   chan struct{}
	mu     sync.Mutex
	order  []float64
	closed atomic.Bool
}

func (g *gated) Metadata() servables.Metadata { return servables.Metadata{Runtime: "gated"} }

func (g *gated) Predict(_ context.Context, in []servables.Tensor) ([]servables.Tensor, error) {
	<-g.gate
	v := in[0].Float64At(0)
	if v < 0 {
		panic("negative input")
	}
	g.mu.Lock()
	g.order = append(g.order, v)
	g.mu.Unlock()
	return in, nil
}

func (g *gated) Close() error { g.closed.Store(true); return nil }

func (g *gated) seen() []float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]float64(nil), g.order...)
}

func scalar(t *testing.T, v float32) []servables.Tensor {
	t.Helper()
	x, err := servables.NewTensor("x", servables.Float32, []int64{1})
	if err != nil {
		t.Fatal(err)
	}
	x.Float32s()[0] = v
	return []servables.Tensor{x}
}

func testSystem(t *testing.T) *actor.ActorSystem {
	as := actor.NewActorSystem()
	t.Cleanup(as.Shutdown)
	return as
}

// spawnModel starts a model actor over s with the given reload function, as a
// child of a supervisor that always restarts it.
func spawnModel(t *testing.T, as *actor.ActorSystem, s servables.Servable, reload func(context.Context) (servables.Servable, error)) *content {
	return spawnBatchingModel(t, as, s, reload, 0)
}

// spawnBatchingModel is spawnModel with dynamic batches of maxBatchRows.
func spawnBatchingModel(t *testing.T, as *actor.ActorSystem, s servables.Servable, reload func(context.Context) (servables.Servable, error), maxBatchRows int) *content {
	return spawnReplicas(t, as, s, reload, batchOptions{maxRows: maxBatchRows}, 1)
}

// spawnReplicas starts n model actors sharing s, as the supervisor does.
func spawnReplicas(t *testing.T, as *actor.ActorSystem, s servables.Servable, reload func(context.Context) (servables.Servable, error), bo batchOptions, n int) *content {
	t.Helper()
	c := &content{path: "m/", checksum: "c", local: &bucket.LocalModel{}, busy: make([]atomic.Int64, n)}
	m := NewMetrics(prometheus.NewRegistry())
	shared := share(s, n)
	ready := make(chan struct{})
	parent := actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*actor.Started); ok {
			for range n {
				c.pids = append(c.pids, ctx.Spawn(modelProps(c, shared, reload, slog.New(slog.DiscardHandler), m, bo, nil, nil, nil, nil)))
			}
			close(ready)
		}
	}, actor.WithSupervisor(restartAlways()))
	as.Root.Spawn(parent)
	<-ready
	return c
}

func send(as *actor.ActorSystem, c *content, inputs []servables.Tensor, prio int8) chan error {
	errc := make(chan error, 1)
	c.queued.Add(1)
	c.inflight.Add(1)
	as.Root.Send(c.pids[0], &predict{inputs: inputs, priority: prio, enqueued: time.Now(),
		done: func(_ []servables.Tensor, err error, _, _ time.Duration) {
			c.inflight.Add(-1)
			errc <- err
		}})
	return errc
}

func TestUserRequestsOvertakeQueuedWarmUpAndShadowWork(t *testing.T) {
	as := testSystem(t)
	g := &gated{gate: make(chan struct{})}
	c := spawnModel(t, as, g, nil)

	var waits []chan error
	waits = append(waits, send(as, c, scalar(t, 0), priorityShadow)) // taken at once, blocks on the gate
	time.Sleep(50 * time.Millisecond)
	for i := 1; i <= 3; i++ {
		waits = append(waits, send(as, c, scalar(t, float32(i)), priorityShadow))
	}
	waits = append(waits, send(as, c, scalar(t, 10), priorityWarmUp))
	waits = append(waits, send(as, c, scalar(t, 100), priorityUser))
	close(g.gate)
	for _, w := range waits {
		if err := <-w; err != nil {
			t.Fatal(err)
		}
	}
	want := []float64{0, 100, 10, 1, 2, 3}
	if got := g.seen(); !slices.Equal(got, want) {
		t.Fatalf("processing order %v, want %v (user, then warm-up, then shadow)", got, want)
	}
}

func TestPanicFailsOnlyItsRequestAndRestartsFromCache(t *testing.T) {
	as := testSystem(t)
	first := &gated{gate: make(chan struct{})}
	close(first.gate)
	second := &gated{gate: make(chan struct{})}
	close(second.gate)
	var reloads atomic.Int32
	c := spawnModel(t, as, first, func(context.Context) (servables.Servable, error) {
		reloads.Add(1)
		return second, nil
	})

	crash := send(as, c, scalar(t, -1), priorityUser)
	after := send(as, c, scalar(t, 5), priorityUser)
	if err := <-crash; !errors.Is(err, ErrModelCrashed) {
		t.Fatalf("panicking request got %v, want ErrModelCrashed", err)
	}
	if err := <-after; err != nil {
		t.Fatalf("request queued behind the crash got %v, want an answer from the restarted model", err)
	}
	if reloads.Load() != 1 || !first.closed.Load() {
		t.Errorf("reloads %d, first servable closed %v; want one reload and the crashed servable closed", reloads.Load(), first.closed.Load())
	}
	if got := second.seen(); !slices.Equal(got, []float64{5}) {
		t.Errorf("restarted servable saw %v, want [5]", got)
	}
	if c.crashes.Load() != 1 {
		t.Errorf("crashes = %d, want 1", c.crashes.Load())
	}
}

// wait waits for every item of b to be answered and returns the results.
func (b *batch) wait() []Result {
	<-b.reply
	return b.results
}

func TestRouterFailsFastWhenModelQueueIsFull(t *testing.T) {
	as := testSystem(t)
	g := &gated{gate: make(chan struct{})}
	c := spawnModel(t, as, g, nil)
	var routes atomic.Pointer[table]
	routes.Store(&table{"m/": c})
	router := as.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &routerActor{ways: ways{routes: &routes, queueLimit: 2, metrics: NewMetrics(prometheus.NewRegistry())}}
	}, actor.WithMailbox(actor.UnboundedPriority())))

	infer := func(path string, v float32) *batch {
		b := newBatch(context.Background(), []Request{{ModelPath: path, Inputs: scalar(t, v)}})
		as.Root.Send(router, b)
		return b
	}
	running := infer("m/", 1) // taken by the actor, blocks
	time.Sleep(50 * time.Millisecond)
	q1, q2 := infer("m/", 2), infer("m/", 3) // fill the queue of 2
	time.Sleep(50 * time.Millisecond)
	beyond := infer("m/", 4)
	select {
	case <-beyond.reply:
		if !errors.Is(beyond.results[0].Err, ErrOverloaded) {
			t.Fatalf("request beyond the queue limit got %v, want ErrOverloaded", beyond.results[0].Err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("request beyond the queue limit waited instead of failing fast")
	}
	if res := infer("nope/", 1).wait(); !errors.Is(res[0].Err, ErrModelNotFound) {
		t.Fatalf("unknown path got %v, want ErrModelNotFound", res[0].Err)
	}
	close(g.gate)
	for _, b := range []*batch{running, q1, q2} {
		if res := b.wait(); res[0].Err != nil {
			t.Fatal(res[0].Err)
		}
	}
}

func TestRouterAnswersBatchItemsInRequestOrder(t *testing.T) {
	as := testSystem(t)
	slow := &gated{gate: make(chan struct{})}
	fast := &gated{gate: make(chan struct{})}
	close(fast.gate)
	cs, cf := spawnModel(t, as, slow, nil), spawnModel(t, as, fast, nil)
	cs.path, cf.path = "slow/", "fast/"
	var routes atomic.Pointer[table]
	routes.Store(&table{"slow/": cs, "fast/": cf})
	router := as.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &routerActor{ways: ways{routes: &routes, metrics: NewMetrics(prometheus.NewRegistry())}}
	}, actor.WithMailbox(actor.UnboundedPriority())))
	b := newBatch(context.Background(), []Request{{ModelPath: "slow/", Inputs: scalar(t, 1)}, {ModelPath: "fast/", Inputs: scalar(t, 2)}, {ModelPath: "x/"}})
	as.Root.Send(router, b)
	time.Sleep(50 * time.Millisecond)
	if len(fast.seen()) != 1 {
		t.Fatal("the fast model did not run while the slow one was busy")
	}
	close(slow.gate)
	res := b.wait()
	if res[0].Outputs[0].Float32s()[0] != 1 || res[1].Outputs[0].Float32s()[0] != 2 || !errors.Is(res[2].Err, ErrModelNotFound) {
		t.Fatalf("results out of order: %+v", res)
	}
}

// A shadow request handed to the low-priority workers is answered once
// even when its answer's own handling panics (its done, through the
// prediction sink): done counts the request out of the model, and a
// second call would count it out twice.
func TestAShadowRequestIsAnsweredOnceEvenWhenItsAnswerPanics(t *testing.T) {
	g := &gated{gate: make(chan struct{})}
	close(g.gate)
	low := newLowPriority(1, 1, slog.New(slog.DiscardHandler), nil)
	defer low.stop()
	a := &modelActor{c: &content{path: "m/"}, s: g, low: low, log: slog.New(slog.DiscardHandler), m: NewMetrics(prometheus.NewRegistry())}
	var calls atomic.Int32
	m := &predict{inputs: scalar(t, 1), priority: priorityShadow, enqueued: time.Now(), done: func([]servables.Tensor, error, time.Duration, time.Duration) {
		if calls.Add(1) == 1 {
			panic("the prediction sink failed")
		}
	}}
	a.handOff(m)
	a.shadowJobs.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("done called %d times, want 1", n)
	}
}

// restartRecorder is an actor.Supervisor that records what it is told to
// do with its children.
type restartRecorder struct{ restarted, stopped int }

func (r *restartRecorder) Children() []*actor.PID        { return nil }
func (r *restartRecorder) EscalateFailure(any, any)      {}
func (r *restartRecorder) RestartChildren(...*actor.PID) { r.restarted++ }
func (r *restartRecorder) StopChildren(...*actor.PID)    { r.stopped++ }
func (r *restartRecorder) ResumeChildren(...*actor.PID)  {}

// TestAModelActorThatCrashesOftenIsRestartedWithoutARecordPerCrash: a
// model actor is restarted after every crash, and its restart statistics
// (which live as long as the actor) do not grow with each crash: a model
// that a bad input makes panic, again and again for months, must not
// make its actor hold the time of every panic.
func TestAModelActorThatCrashesOftenIsRestartedWithoutARecordPerCrash(t *testing.T) {
	as := actor.NewActorSystem()
	defer as.Shutdown()
	strategy, sup := restartAlways(), &restartRecorder{}
	rs, child := actor.NewRestartStatistics(), actor.NewPID("local", "model-1-0")
	const crashes = 1000
	for range crashes {
		strategy.HandleFailure(as, sup, child, rs, "panic", nil)
	}
	if sup.restarted != crashes || sup.stopped != 0 {
		t.Fatalf("after %d crashes: %d restarts, %d stops; want a restart for each", crashes, sup.restarted, sup.stopped)
	}
	if n := rs.FailureCount(); n > 0 {
		t.Fatalf("the restart statistics hold %d crash times after %d crashes; want none kept", n, crashes)
	}
}
