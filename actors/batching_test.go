package actors

import (
	"context"
	"errors"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/groveml/grove/servables"
)

// doubler is a servable that answers 2x its input, blocks its first call on
// a gate, records each call's row count, and fails calls holding a -1.
type doubler struct {
	gate chan struct{}
	// entered, if not nil, is closed when the first call reaches the gate.
	entered chan struct{}
	once    sync.Once
	mu      sync.Mutex
	calls   []int
}

func (d *doubler) Metadata() servables.Metadata { return servables.Metadata{Runtime: "doubler"} }
func (d *doubler) Close() error                 { return nil }

func (d *doubler) Predict(_ context.Context, in []servables.Tensor) ([]servables.Tensor, error) {
	d.once.Do(func() {
		if d.entered != nil {
			close(d.entered)
		}
		<-d.gate
	})
	d.mu.Lock()
	d.calls = append(d.calls, int(in[0].Shape[0]))
	d.mu.Unlock()
	out, _ := servables.NewTensor("y", servables.Float32, in[0].Shape)
	for i, v := range in[0].Float32s() {
		if v == -1 {
			return nil, errors.New("bad row")
		}
		out.Float32s()[i] = 2 * v
	}
	return []servables.Tensor{out}, nil
}

func (d *doubler) rows() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]int(nil), d.calls...)
}

type answer struct {
	out []servables.Tensor
	err error
}

func sendUser(t *testing.T, c *content, rows int, v float32, send func(*predict)) chan answer {
	t.Helper()
	p, ch := userRequest(t, c, rows, v)
	post(c, p, send)
	return ch
}

// userRequest builds a user request of rows rows of v for c, and the
// channel its answer comes on.
func userRequest(t *testing.T, c *content, rows int, v float32) (*predict, chan answer) {
	t.Helper()
	x, err := servables.NewTensor("x", servables.Float32, []int64{int64(rows), 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range x.Float32s() {
		x.Float32s()[i] = v
	}
	ch := make(chan answer, 1)
	return &predict{inputs: []servables.Tensor{x}, priority: priorityUser, enqueued: time.Now(),
		done: func(out []servables.Tensor, err error, _, _ time.Duration) {
			c.inflight.Add(-1)
			ch <- answer{out, err}
		}}, ch
}

// post counts p in c's queue, as the router does, and sends it.
func post(c *content, p *predict, send func(*predict)) {
	c.queued.Add(1)
	c.inflight.Add(1)
	send(p)
}

func TestQueuedUserRequestsRunAsOneBatchAndGetTheirOwnRows(t *testing.T) {
	as := testSystem(t)
	d := &doubler{gate: make(chan struct{})}
	c := spawnBatchingModel(t, as, d, nil, 8)
	send := func(p *predict) { as.Root.Send(c.pids[0], p) }

	first := sendUser(t, c, 1, 1, send) // taken at once, blocks on the gate
	time.Sleep(50 * time.Millisecond)
	var waiting []chan answer
	for i, rows := range []int{1, 2, 3, 2, 4} { // 1+2+3+2 = 8 rows fit; the 4-row one starts a second batch
		waiting = append(waiting, sendUser(t, c, rows, float32(10+i), send))
	}
	time.Sleep(50 * time.Millisecond)
	close(d.gate)
	if a := <-first; a.err != nil {
		t.Fatal(a.err)
	}
	for i, ch := range waiting {
		a := <-ch
		if a.err != nil {
			t.Fatalf("request %d: %v", i, a.err)
		}
		rows := []int{1, 2, 3, 2, 4}[i]
		y := a.out[0]
		if y.Shape[0] != int64(rows) || len(y.Float32s()) != rows*2 {
			t.Fatalf("request %d: output shape %v", i, y.Shape)
		}
		for _, v := range y.Float32s() {
			if v != 2*float32(10+i) {
				t.Fatalf("request %d got %v, want its own rows doubled (%v)", i, y.Float32s(), 2*float32(10+i))
			}
		}
	}
	if got := d.rows(); len(got) != 3 || got[0] != 1 || got[1] != 8 || got[2] != 4 {
		t.Errorf("forward calls had rows %v, want [1 8 4]", got)
	}
	if n := c.stats.executions.Load(); n != 3 {
		t.Errorf("statistics count %d executions, want 3: one per forward call, a batch of four requests being one", n)
	}
}

func TestABadRequestInABatchFailsAlone(t *testing.T) {
	as := testSystem(t)
	d := &doubler{gate: make(chan struct{})}
	c := spawnBatchingModel(t, as, d, nil, 64)
	send := func(p *predict) { as.Root.Send(c.pids[0], p) }
	first := sendUser(t, c, 1, 1, send)
	time.Sleep(50 * time.Millisecond)
	good1 := sendUser(t, c, 1, 3, send)
	bad := sendUser(t, c, 1, -1, send)
	good2 := sendUser(t, c, 2, 5, send)
	time.Sleep(50 * time.Millisecond)
	close(d.gate)
	<-first
	for name, ch := range map[string]chan answer{"good1": good1, "good2": good2} {
		if a := <-ch; a.err != nil {
			t.Errorf("%s failed with the bad request: %v", name, a.err)
		}
	}
	if a := <-bad; a.err == nil {
		t.Error("the bad request succeeded")
	}
	// The batch of 4 rows failed, then each request ran alone.
	if got := d.rows(); len(got) != 5 || got[1] != 4 {
		t.Errorf("forward calls had rows %v, want [1 4 1 1 2]", got)
	}
}

func TestBatchingOffRunsEachRequestAlone(t *testing.T) {
	as := testSystem(t)
	d := &doubler{gate: make(chan struct{})}
	c := spawnBatchingModel(t, as, d, nil, 1)
	send := func(p *predict) { as.Root.Send(c.pids[0], p) }
	var all []chan answer
	for i := range 4 {
		all = append(all, sendUser(t, c, 1, float32(i), send))
	}
	time.Sleep(50 * time.Millisecond)
	close(d.gate)
	for _, ch := range all {
		<-ch
	}
	if got := d.rows(); len(got) != 4 {
		t.Errorf("forward calls had rows %v, want four calls of 1", got)
	}
}

// yieldHook stands in for a model actor's yield (yieldToWaiting) as if
// goroutines were always waiting: it counts the yields and runs during, if
// set, inside each (on the actor's goroutine).
type yieldHook struct {
	n      atomic.Int64
	during func(n int64)
}

func (y *yieldHook) yield() bool {
	n := y.n.Add(1)
	if y.during != nil {
		y.during(n)
	}
	return true
}

// wantOwnRowsDoubled checks that each answer holds its request's value
// doubled, in as many rows as it sent.
func wantOwnRowsDoubled(t *testing.T, chs []chan answer, rows []int, vals []float32) {
	t.Helper()
	for i, ch := range chs {
		a := <-ch
		if a.err != nil {
			t.Fatalf("request %d: %v", i, a.err)
		}
		y := a.out[0]
		if y.Shape[0] != int64(rows[i]) {
			t.Fatalf("request %d: output shape %v, want %d rows", i, y.Shape, rows[i])
		}
		for _, v := range y.Float32s() {
			if v != 2*vals[i] {
				t.Fatalf("request %d got %v, want its own rows doubled (%v)", i, y.Float32s(), 2*vals[i])
			}
		}
	}
}

func TestALoneRequestRunsAfterOneYieldWhenNothingArrivesMeanwhile(t *testing.T) {
	as := testSystem(t)
	d := &doubler{gate: make(chan struct{})}
	close(d.gate)
	var y yieldHook
	c := spawnReplicas(t, as, d, nil, batchOptions{maxRows: 8, yield: y.yield}, 1)
	send := func(p *predict) { as.Root.Send(c.pids[0], p) }
	for i := range 3 { // one after another: each finds the model idle
		wantOwnRowsDoubled(t, []chan answer{sendUser(t, c, 1, float32(i), send)}, []int{1}, []float32{float32(i)})
	}
	if got := d.rows(); len(got) != 3 || got[0] != 1 || got[1] != 1 || got[2] != 1 {
		t.Errorf("forward calls had rows %v, want [1 1 1]", got)
	}
	if n := y.n.Load(); n != 3 {
		t.Errorf("the actor yielded %d times, want once before each forward call", n)
	}
}

// yieldingModel spawns one model actor on a doubler that never blocks,
// with batches of up to maxRows rows, and yields counted by the returned
// hook; during, if not nil, runs inside each yield, given the yield's
// number and a send to the actor.
func yieldingModel(t *testing.T, maxRows int, during func(n int64, send func(*predict))) (*content, *doubler, *yieldHook, func(*predict)) {
	t.Helper()
	as := testSystem(t)
	d := &doubler{gate: make(chan struct{})}
	close(d.gate)
	var c *content
	send := func(p *predict) { as.Root.Send(c.pids[0], p) }
	y := &yieldHook{}
	if during != nil {
		y.during = func(n int64) { during(n, send) }
	}
	c = spawnReplicas(t, as, d, nil, batchOptions{maxRows: maxRows, yield: y.yield}, 1)
	return c, d, y, send
}

func TestRequestsArrivingWhileAnIdleModelYieldsJoinTheBatch(t *testing.T) {
	var c *content
	var arriving []*predict
	c, d, y, send := yieldingModel(t, 8, func(n int64, send func(*predict)) {
		if n == 1 { // the first request's yield: two more arrive
			for _, p := range arriving {
				post(c, p, send)
			}
		}
	})
	p2, later2 := userRequest(t, c, 2, 10)
	p3, later3 := userRequest(t, c, 3, 11)
	arriving, later := []*predict{p2, p3}, []chan answer{later2, later3}
	first := sendUser(t, c, 1, 1, send)
	wantOwnRowsDoubled(t, []chan answer{first}, []int{1}, []float32{1})
	wantOwnRowsDoubled(t, later, []int{2, 3}, []float32{10, 11})
	if got := d.rows(); len(got) != 1 || got[0] != 6 {
		t.Errorf("forward calls had rows %v, want one call of 6", got)
	}
	if n := y.n.Load(); n != 2 {
		t.Errorf("the actor yielded %d times, want twice: the lone request's yield, then its flush's, which brought nobody", n)
	}
}

func TestAFlushYieldsAgainWhileRequestsJoinItsBatch(t *testing.T) {
	var c *content
	var later []chan answer
	c, d, y, send := yieldingModel(t, 8, func(n int64, send func(*predict)) {
		if n <= 3 { // the lone request's yield and the flush's first two: one more each
			later = append(later, sendUser(t, c, 1, float32(10+n), send))
		}
	})
	first := sendUser(t, c, 1, 1, send)
	wantOwnRowsDoubled(t, []chan answer{first}, []int{1}, []float32{1})
	wantOwnRowsDoubled(t, later, []int{1, 1, 1}, []float32{11, 12, 13})
	if got := d.rows(); len(got) != 1 || got[0] != 4 {
		t.Errorf("forward calls had rows %v, want one call of 4", got)
	}
	if n := y.n.Load(); n != 4 {
		t.Errorf("the actor yielded %d times, want 4: until a yield brought nobody", n)
	}
}

func TestAFlushYieldsAtMostFlushYieldLimitTimes(t *testing.T) {
	var c *content
	var later []chan answer
	c, d, _, send := yieldingModel(t, 64, func(_ int64, send func(*predict)) { // every yield brings one more request
		if len(later) < 2*flushYieldLimit {
			later = append(later, sendUser(t, c, 1, 2, send))
		}
	})
	first := sendUser(t, c, 1, 2, send)
	wantOwnRowsDoubled(t, []chan answer{first}, []int{1}, []float32{2})
	for _, ch := range later {
		wantOwnRowsDoubled(t, []chan answer{ch}, []int{1}, []float32{2})
	}
	// The lone request's yield brings one, the flush's flushYieldLimit
	// yields one each; then the batch runs.
	if got := d.rows(); len(got) == 0 || got[0] != 2+flushYieldLimit {
		t.Errorf("forward calls had rows %v, want the first of %d", got, 2+flushYieldLimit)
	}
}

func TestAFlushDoesNotYieldOnceItsBatchIsFull(t *testing.T) {
	as := testSystem(t)
	d := &doubler{gate: make(chan struct{}), entered: make(chan struct{})}
	var y yieldHook
	c := spawnReplicas(t, as, d, nil, batchOptions{maxRows: 4, yield: y.yield}, 1)
	send := func(p *predict) { as.Root.Send(c.pids[0], p) }
	first := sendUser(t, c, 1, 1, send)
	<-d.entered // the first request runs alone and holds the model
	queued := []chan answer{sendUser(t, c, 2, 10, send), sendUser(t, c, 2, 11, send)}
	close(d.gate)
	wantOwnRowsDoubled(t, []chan answer{first}, []int{1}, []float32{1})
	wantOwnRowsDoubled(t, queued, []int{2, 2}, []float32{10, 11})
	if got := d.rows(); len(got) != 2 || got[1] != 4 {
		t.Errorf("forward calls had rows %v, want [1 4]", got)
	}
	if n := y.n.Load(); n != 1 {
		t.Errorf("the actor yielded %d times, want once: for the first request, not for a flush of max_batch_rows", n)
	}
}

func TestABusyModelGathersRequestsAndYieldsOnlyBeforeItsFlush(t *testing.T) {
	as := testSystem(t)
	d := &doubler{gate: make(chan struct{}), entered: make(chan struct{})}
	var y yieldHook
	c := spawnReplicas(t, as, d, nil, batchOptions{maxRows: 8, yield: y.yield}, 1)
	send := func(p *predict) { as.Root.Send(c.pids[0], p) }
	first := sendUser(t, c, 1, 1, send)
	<-d.entered // the first request runs alone and holds the model
	queued := []chan answer{sendUser(t, c, 2, 10, send), sendUser(t, c, 3, 11, send)}
	close(d.gate)
	wantOwnRowsDoubled(t, []chan answer{first}, []int{1}, []float32{1})
	wantOwnRowsDoubled(t, queued, []int{2, 3}, []float32{10, 11})
	if got := d.rows(); len(got) != 2 || got[0] != 1 || got[1] != 5 {
		t.Errorf("forward calls had rows %v, want [1 5]", got)
	}
	if n := y.n.Load(); n != 2 {
		t.Errorf("the actor yielded %d times, want twice: for the first request and once before the flush, not for each request that waited", n)
	}
}

func TestAModelWithReplicasDoesNotYield(t *testing.T) {
	as := testSystem(t)
	d := &doubler{gate: make(chan struct{})}
	close(d.gate)
	var y yieldHook
	c := spawnReplicas(t, as, d, nil, batchOptions{maxRows: 8, yield: y.yield}, 2)
	send := func(p *predict) { c.send(func(pid *actor.PID, m any) { as.Root.Send(pid, m) }, p, false) }
	for i := range 3 {
		wantOwnRowsDoubled(t, []chan answer{sendUser(t, c, 1, float32(i), send)}, []int{1}, []float32{float32(i)})
	}
	if n := y.n.Load(); n != 0 {
		t.Errorf("the actor yielded %d times, want none: a newcomer would go to the idle replica", n)
	}
}

func TestARequestCancelledWhileTheModelYieldsDoesNotRun(t *testing.T) {
	as := testSystem(t)
	d := &doubler{gate: make(chan struct{})}
	close(d.gate)
	ctx, cancel := context.WithCancel(context.Background())
	y := yieldHook{during: func(int64) { cancel() }} // the caller goes away meanwhile
	c := spawnReplicas(t, as, d, nil, batchOptions{maxRows: 8, yield: y.yield}, 1)
	p, ch := userRequest(t, c, 1, 1)
	p.ctx = ctx
	post(c, p, func(p *predict) { as.Root.Send(c.pids[0], p) })
	if a := <-ch; !errors.Is(a.err, servables.ErrCanceled) {
		t.Fatalf("answer %v, want the request cancelled", a.err)
	}
	if got := d.rows(); len(got) != 0 {
		t.Errorf("forward calls had rows %v, want none", got)
	}
	if q := c.queued.Load(); q != 0 {
		t.Errorf("the model's queue counts %d requests, want 0", q)
	}
}

func TestYieldToWaitingYieldsWhenAGoroutineWaits(t *testing.T) {
	yield := yieldToWaiting()
	// Keep every other processor busy, so that a new goroutine waits for
	// this one's.
	var stop atomic.Bool
	var spinners sync.WaitGroup
	for range runtime.GOMAXPROCS(0) - 1 {
		spinners.Go(func() {
			for !stop.Load() {
			}
		})
	}
	ran := make(chan struct{})
	go close(ran)
	waited := yield()
	stop.Store(true)
	spinners.Wait()
	<-ran
	if !waited {
		t.Error("a goroutine was waiting for a processor, and the yield said none was")
	}
	// Whether none waits depends on the package's other goroutines; the
	// count the yield reads must exist, or it would never yield.
	runnable := []metrics.Sample{{Name: "/sched/goroutines/runnable:goroutines"}}
	if metrics.Read(runnable); runnable[0].Value.Kind() != metrics.KindUint64 {
		t.Errorf("the runtime has no count of runnable goroutines (kind %v)", runnable[0].Value.Kind())
	}
}

func TestTheActorYieldsOnlyWhereABatchCouldGrow(t *testing.T) {
	for _, tc := range []struct {
		name string
		bo   batchOptions
		rows int
	}{
		{"batching off", batchOptions{maxRows: 1}, 1},
		{"max_queue_delay set", batchOptions{maxRows: 8, delay: time.Millisecond}, 1},
		{"a request of max_batch_rows", batchOptions{maxRows: 4}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := testSystem(t)
			d := &doubler{gate: make(chan struct{})}
			close(d.gate)
			var y yieldHook
			tc.bo.yield = y.yield
			c := spawnReplicas(t, as, d, nil, tc.bo, 1)
			send := func(p *predict) { as.Root.Send(c.pids[0], p) }
			for i := range 2 {
				wantOwnRowsDoubled(t, []chan answer{sendUser(t, c, tc.rows, float32(i), send)}, []int{tc.rows}, []float32{float32(i)})
			}
			if n := y.n.Load(); n != 0 {
				t.Errorf("the actor yielded %d times, want none", n)
			}
		})
	}
}

func TestMaxQueueDelayLetsALoneRequestWaitForCompany(t *testing.T) {
	as := testSystem(t)
	d := &doubler{gate: make(chan struct{})}
	close(d.gate)
	c := spawnReplicas(t, as, d, nil, batchOptions{maxRows: 8, delay: 200 * time.Millisecond}, 1)
	send := func(p *predict) { as.Root.Send(c.pids[0], p) }
	start := time.Now()
	a := sendUser(t, c, 1, 1, send)
	time.Sleep(20 * time.Millisecond)
	b := sendUser(t, c, 2, 2, send)
	for _, ch := range []chan answer{a, b} {
		if r := <-ch; r.err != nil {
			t.Fatal(r.err)
		}
	}
	if el := time.Since(start); el < 150*time.Millisecond {
		t.Errorf("answered after %v, before the 200ms delay", el)
	}
	if got := d.rows(); len(got) != 1 || got[0] != 3 {
		t.Errorf("forward calls had rows %v, want one call of 3", got)
	}
}

func TestMaxQueueDelayRunsAFullBatchWithoutWaiting(t *testing.T) {
	as := testSystem(t)
	d := &doubler{gate: make(chan struct{})}
	close(d.gate)
	c := spawnReplicas(t, as, d, nil, batchOptions{maxRows: 4, delay: time.Hour}, 1)
	send := func(p *predict) { as.Root.Send(c.pids[0], p) }
	a := sendUser(t, c, 1, 1, send)
	b := sendUser(t, c, 3, 2, send)
	for _, ch := range []chan answer{a, b} {
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatal(r.err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a full batch waited for the delay")
		}
	}
	if got := d.rows(); len(got) != 1 || got[0] != 4 {
		t.Errorf("forward calls had rows %v, want one call of 4", got)
	}
}

// concurrentServable counts concurrent forward calls, each held until release closes,
// and its closes.
type concurrentServable struct {
	release       chan struct{}
	mu            sync.Mutex
	running, most int
	closes        atomic.Int32
	started       chan struct{}
}

func (g *concurrentServable) Metadata() servables.Metadata {
	return servables.Metadata{Runtime: "concurrentServable"}
}
func (g *concurrentServable) Close() error { g.closes.Add(1); return nil }

func (g *concurrentServable) Predict(_ context.Context, in []servables.Tensor) ([]servables.Tensor, error) {
	g.mu.Lock()
	g.running++
	g.most = max(g.most, g.running)
	g.mu.Unlock()
	g.started <- struct{}{}
	<-g.release
	g.mu.Lock()
	g.running--
	g.mu.Unlock()
	return in, nil
}

func TestReplicasRunConcurrentlyOnOneServableAndCloseItOnce(t *testing.T) {
	as := actor.NewActorSystem()
	g := &concurrentServable{release: make(chan struct{}), started: make(chan struct{}, 8)}
	c := spawnReplicas(t, as, g, nil, batchOptions{maxRows: 1}, 3)
	var answers []chan answer
	for i := range 3 {
		answers = append(answers, sendUser(t, c, 1, float32(i), func(p *predict) { c.send(as.Root.Send, p, false) }))
	}
	for range 3 {
		select {
		case <-g.started:
		case <-time.After(5 * time.Second):
			t.Fatalf("only %d forward calls running at once, want 3 (one per replica)", g.most)
		}
	}
	for i := range c.busy {
		if n := c.busy[i].Load(); n != 1 {
			t.Errorf("replica %d has %d requests, want 1 each (least busy first)", i, n)
		}
	}
	close(g.release)
	for _, ch := range answers {
		if r := <-ch; r.err != nil {
			t.Fatal(r.err)
		}
	}
	for i, p := range c.pids {
		if err := as.Root.StopFuture(p).Wait(); err != nil {
			t.Fatal(err)
		}
		// The replicas share the servable: it stays open while any of
		// them runs.
		if n := g.closes.Load(); i < len(c.pids)-1 && n != 0 {
			t.Errorf("servable closed %d times once %d of %d replicas stopped, want open until the last stops", n, i+1, len(c.pids))
		}
	}
	if n := g.closes.Load(); n != 1 {
		t.Errorf("servable closed %d times, want once after the last replica stopped", n)
	}
	as.Shutdown()
}

// A request that panics the model inside a dynamic batch fails alone:
// the actor restarts and runs the batch's requests one by one, so the
// others are answered, and only the poison one gets "model crashed".
func TestARequestThatPanicsADynamicBatchFailsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", `"max_batch_rows": 8`)), map[string]faultySpec{"a/": {PanicOn: f64(13), DelayMs: 10}})
		defer w.stop()
		synctest.Wait()
		first := w.busy("a/") // the three below queue behind it and run as one batch
		values := []float32{2, 13, 3}
		answers := make([]chan Result, len(values))
		for i, v := range values {
			answers[i] = make(chan Result, 1)
			go func() { answers[i] <- w.infer("a/", v) }()
			synctest.Wait()
		}
		if r := <-first; r.Err != nil {
			t.Fatalf("the first request: %v", r.Err)
		}
		for i, ch := range answers {
			r := <-ch
			switch crashed := errors.Is(r.Err, ErrModelCrashed); {
			case values[i] == 13 && !crashed:
				t.Errorf("the poison request: %v, want model crashed", r.Err)
			case values[i] != 13 && r.Err != nil:
				t.Errorf("request %v, batched with the poison one: %v, want its answer", values[i], r.Err)
			}
		}
		if n := w.metric("grove_model_crashes_total", map[string]string{"model": "a/"}); n != 2 {
			t.Errorf("%v crashes, want 2 (the batch, then the poison request alone)", n)
		}
	})
}

// When a batch fails, its requests run again one by one, except those
// whose callers can no longer use the answer: with the batch taking 10 ms
// and each request alone 10 ms more, a request whose 28 ms deadline it
// can no longer meet is dropped unrun (counted expired), not run for
// nobody.
func TestAFailedBatchRunsAgainOnlyTheRequestsStillWanted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", `"max_batch_rows": 8`)), map[string]faultySpec{"a/": {ErrorOn: f64(7), DelayMs: 10}})
		defer w.stop()
		synctest.Wait()
		first := w.busy("a/")
		answers := make(chan Result, 3)
		for _, v := range []float32{7, 2, 3} {
			go func() {
				ctx, cancel := context.Background(), context.CancelFunc(func() {})
				if v != 7 {
					ctx, cancel = context.WithTimeout(ctx, 28*time.Millisecond)
				}
				defer cancel()
				res, err := w.inferCtx(ctx, "a/", v)
				if err != nil {
					t.Error(err)
				}
				answers <- res[0]
			}()
			synctest.Wait()
		}
		<-first
		for range 3 {
			<-answers
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		// The first request, the batch, then two of its three alone: one
		// with a deadline can no longer be answered in time by then.
		if got := w.rt.order(); len(got) != 4 {
			t.Errorf("forward calls (first value of each) %v, want 4", got)
		}
		if n := w.metric("grove_requests_expired_total", map[string]string{"model": "a/"}); n != 1 {
			t.Errorf("%v requests expired, want 1", n)
		}
	})
}

// A model whose yields bring no request, eight in a row (a caller that
// sends one request at a time), yields only for one lone request in
// sixteen; a yield that brings one makes it yield for each again.
func TestAModelWhoseYieldsBringNobodyYieldsRarelyUntilOneDoes(t *testing.T) {
	as := testSystem(t)
	d := &doubler{gate: make(chan struct{})}
	close(d.gate)
	var c *content
	var joinAt atomic.Int64
	var extra []chan answer
	y := yieldHook{during: func(n int64) {
		if n == joinAt.Load() { // this yield brings a request
			extra = append(extra, sendUser(t, c, 1, 7, func(p *predict) { as.Root.Send(c.pids[0], p) }))
		}
	}}
	c = spawnReplicas(t, as, d, nil, batchOptions{maxRows: 8, yield: y.yield}, 1)
	send := func(p *predict) { as.Root.Send(c.pids[0], p) }
	lone := func(k int) {
		for i := range k { // one after another: each finds the model idle
			wantOwnRowsDoubled(t, []chan answer{sendUser(t, c, 1, float32(i), send)}, []int{1}, []float32{float32(i)})
		}
	}
	lone(yieldMissLimit + 2*yieldProbeEvery)
	if n, want := y.n.Load(), int64(yieldMissLimit+2); n != want {
		t.Fatalf("the actor yielded %d times for %d lone requests, want %d: every time until %d yields brought nobody, then once in %d",
			n, yieldMissLimit+2*yieldProbeEvery, want, yieldMissLimit, yieldProbeEvery)
	}
	joinAt.Store(y.n.Load() + 1) // the next probe brings a request
	lone(yieldProbeEvery)
	wantOwnRowsDoubled(t, extra, []int{1}, []float32{7})
	before := y.n.Load()
	lone(3)
	if n := y.n.Load() - before; n != 3 {
		t.Errorf("after a yield that brought a request, the actor yielded %d times for 3 lone requests, want 3", n)
	}
}
