package actors

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/groveml/grove/servables"
)

// recordingSink keeps what the router logs.
type recordingSink struct {
	mu     sync.Mutex
	logged []Result
	items  []int // the logged requests' Item
	// received are the logged events' request_timestamp.
	received []time.Time
	served   []bool
	done     chan struct{}
}

func (s *recordingSink) LogPrediction(req *Request, res *Result, served bool) {
	s.mu.Lock()
	s.logged = append(s.logged, *res)
	s.items = append(s.items, req.Item)
	s.received = append(s.received, PredictionEvent(req, res, served).GetRequestTimestamp().AsTime())
	s.served = append(s.served, served)
	s.mu.Unlock()
	s.done <- struct{}{}
}

func column(t *testing.T, vals ...float32) []servables.Tensor {
	t.Helper()
	x, err := servables.NewTensor("x", servables.Float32, []int64{int64(len(vals)), 1})
	if err != nil {
		t.Fatal(err)
	}
	copy(x.Float32s(), vals)
	return []servables.Tensor{x}
}

func startRouter(t *testing.T, as *actor.ActorSystem, routes *atomic.Pointer[table], queueLimit, microBatch int, sink PredictionSink, m *Metrics) *actor.PID {
	return as.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &routerActor{ways: ways{routes: routes, queueLimit: queueLimit, metrics: m}, microBatchRows: microBatch, sink: sink}
	}, actor.WithMailbox(actor.UnboundedPriority())))
}

func TestUserRequestWaitsForAtMostOneShadowMicroBatch(t *testing.T) {
	as := testSystem(t)
	champion := &gated{gate: make(chan struct{})}
	close(champion.gate)
	challenger := &gated{gate: make(chan struct{})}
	cc, cs := spawnModel(t, as, champion, nil), spawnModel(t, as, challenger, nil)
	cc.path, cs.path = "champion/", "challenger/"
	var routes atomic.Pointer[table]
	routes.Store(&table{"champion/": cc, "challenger/": cs})
	sink := &recordingSink{done: make(chan struct{}, 4)}
	router := startRouter(t, as, &routes, 0, 2, sink, NewMetrics(prometheus.NewRegistry()))

	// A 10-row request for the champion, shadowed on the challenger in micro-batches of 2 rows.
	b := newBatch(context.Background(), []Request{{ModelPath: "champion/", Inputs: column(t, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10), Shadows: []ShadowTarget{{ModelPath: "challenger/"}}}})
	as.Root.Send(router, b)
	if res := b.wait(); res[0].Err != nil || res[0].Outputs[0].Float32s()[9] != 10 {
		t.Fatalf("champion answer %+v", res[0])
	}
	time.Sleep(50 * time.Millisecond) // the challenger holds micro-batch 1 at its gate
	user := newBatch(context.Background(), []Request{{ModelPath: "challenger/", Inputs: column(t, 100)}})
	as.Root.Send(router, user)
	time.Sleep(50 * time.Millisecond)
	close(challenger.gate)
	if res := user.wait(); res[0].Err != nil {
		t.Fatal(res[0].Err)
	}
	<-sink.done                           // the shadow execution's log; user answers are logged by System.Infer, not the router
	want := []float64{1, 100, 3, 5, 7, 9} // first value of each call: micro-batch 1, the user, micro-batches 2..5
	if got := challenger.seen(); !slices.Equal(got, want) {
		t.Fatalf("challenger calls %v, want %v (a user request overtakes queued shadow micro-batches)", got, want)
	}
}

// startShadowed starts a router over one open model serving both m/ and
// s/, with micro-batches of microBatch rows, logging to sink.
func startShadowed(t *testing.T, microBatch int, sink PredictionSink) (*actor.ActorSystem, *actor.PID, *content) {
	as := testSystem(t)
	g := &gated{gate: make(chan struct{})}
	close(g.gate)
	c := spawnModel(t, as, g, nil)
	var routes atomic.Pointer[table]
	routes.Store(&table{"m/": c, "s/": c})
	return as, startRouter(t, as, &routes, 0, microBatch, sink, NewMetrics(prometheus.NewRegistry())), c
}

func TestShadowAnswerIsJoinedAndLoggedAsNotServed(t *testing.T) {
	sink := &recordingSink{done: make(chan struct{}, 4)}
	as, router, c := startShadowed(t, 3, sink)
	b := newBatch(context.Background(), []Request{{ModelPath: "m/", Inputs: column(t, 1, 2, 3, 4, 5, 6, 7), Shadows: []ShadowTarget{{ModelPath: "s/"}}}})
	as.Root.Send(router, b)
	<-b.reply
	<-sink.done
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.logged) != 1 || sink.served[0] || sink.logged[0].Err != nil {
		t.Fatalf("logged %+v served %v", sink.logged, sink.served)
	}
	out := sink.logged[0].Outputs[0]
	if !slices.Equal(out.Shape, []int64{7, 1}) || !slices.Equal(out.Float32s(), []float32{1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("joined shadow output %v %v, want the 7 rows in order", out.Shape, out.Float32s())
	}
	if c.shadowed.Load() != 1 {
		t.Errorf("shadow executions = %d, want 1", c.shadowed.Load())
	}
}

// TestShadowCopyIsLoggedWithItsServedRequestsItemAndTime: a shadow copy's
// event names its served request's batch item and carries its request's
// time (when the batch was made), not the time it ran, however long it
// waited: an outcome names the item, and its window starts at the
// request.
func TestShadowCopyIsLoggedWithItsServedRequestsItemAndTime(t *testing.T) {
	as := testSystem(t)
	champion, challenger := &gated{gate: make(chan struct{})}, &gated{gate: make(chan struct{})}
	close(champion.gate)
	cc, cs := spawnModel(t, as, champion, nil), spawnModel(t, as, challenger, nil)
	var routes atomic.Pointer[table]
	routes.Store(&table{"m/": cc, "s/": cs})
	sink := &recordingSink{done: make(chan struct{}, 4)}
	router := startRouter(t, as, &routes, 0, 3, sink, NewMetrics(prometheus.NewRegistry()))
	b := newBatch(context.Background(), []Request{{ModelPath: "m/", Item: 2, Inputs: column(t, 1, 2), Shadows: []ShadowTarget{{ModelPath: "s/"}}}})
	received := b.reqs[0].Received
	as.Root.Send(router, b)
	<-b.reply
	answered := time.Now()
	close(challenger.gate) // the copy runs once the champion has answered
	<-sink.done
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.items) != 1 || sink.served[0] || sink.items[0] != 2 {
		t.Fatalf("shadow logged with items %v served %v, want item 2 (an outcome names the batch item)", sink.items, sink.served)
	}
	if received.IsZero() || !sink.received[0].Equal(received) || !received.Before(answered) {
		t.Fatalf("shadow logged with request_timestamp %v; want its request's %v, before the champion answered at %v", sink.received[0], received, answered)
	}
}

func TestShadowCopiesAreDroppedWhenTheModelIsBusy(t *testing.T) {
	as := testSystem(t)
	g := &gated{gate: make(chan struct{})}
	c := spawnModel(t, as, g, nil)
	var routes atomic.Pointer[table]
	routes.Store(&table{"m/": c})
	m := NewMetrics(prometheus.NewRegistry())
	router := startRouter(t, as, &routes, 8, 0, nil, m) // shadow work may fill 8/4 = 2 queue places
	var replies []*batch
	for i := range 5 {
		b := newBatch(context.Background(), []Request{{ModelPath: "m/", Inputs: column(t, float32(i)), Shadows: []ShadowTarget{{ModelPath: "m/"}}}})
		as.Root.Send(router, b)
		replies = append(replies, b)
	}
	time.Sleep(100 * time.Millisecond)
	if got := testutil.ToFloat64(m.shadowDropped.WithLabelValues("m/", "overloaded")); got < 3 {
		t.Errorf("dropped shadow copies = %v, want at least 3 of 5 with the queue full of user work", got)
	}
	if got, want := c.shadowDropped.Load(), int64(testutil.ToFloat64(m.shadowDropped.WithLabelValues("m/", "overloaded"))); got != want {
		t.Errorf("content counts %d dropped shadow copies, the metric %d", got, want)
	}
	close(g.gate)
	for _, r := range replies {
		if res := r.wait(); res[0].Err != nil {
			t.Fatalf("user request failed: %v", res[0].Err)
		}
	}
}

func TestSplitRowsKeepsNonBatchInputsWhole(t *testing.T) {
	a, _ := servables.NewTensor("a", servables.Float32, []int64{4, 2})
	b, _ := servables.NewTensor("b", servables.Int64, []int64{3})
	if got := splitRows([]servables.Tensor{a, b}, 2); len(got) != 1 {
		t.Errorf("inputs with different first dimensions were cut into %d pieces", len(got))
	}
	if got := splitRows([]servables.Tensor{a}, 3); len(got) != 2 || got[1][0].Shape[0] != 1 || len(got[1][0].Data) != 8 {
		t.Errorf("4 rows by 3: %+v", got)
	}
}

// Shadow micro-batches waiting in a model's mailbox take their own share of
// the queue, never a user request's place: with the shadow share full, user
// requests still fill the whole queue limit before any gets ErrOverloaded.
func TestQueuedShadowWorkNeverOverloadsUserRequests(t *testing.T) {
	as := testSystem(t)
	g := &gated{gate: make(chan struct{})}
	c := spawnModel(t, as, g, nil)
	var routes atomic.Pointer[table]
	routes.Store(&table{"m/": c, "s/": c})
	router := startRouter(t, as, &routes, 8, 1, nil, NewMetrics(prometheus.NewRegistry())) // shadow share: 8/4 = 2

	// One user request holds the model at its gate, with its shadow copy
	// queued behind it.
	first := newBatch(context.Background(), []Request{{ModelPath: "m/", Inputs: column(t, 0), Shadows: []ShadowTarget{{ModelPath: "s/"}}}})
	as.Root.Send(router, first)
	// Wait until the model holds the user request (none queued) and its
	// shadow copy waits in the mailbox.
	for deadline := time.Now().Add(5 * time.Second); c.shadowQueued.Load() != 1 || c.queued.Load() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 5s: %d shadow micro-batches and %d user requests queued, want 1 and 0", c.shadowQueued.Load(), c.queued.Load())
		}
	}
	// Eight more user requests: the whole user limit, beside the shadow copy.
	var replies []*batch
	for i := range 8 {
		b := newBatch(context.Background(), []Request{{ModelPath: "m/", Inputs: column(t, float32(i+1))}})
		as.Root.Send(router, b)
		replies = append(replies, b)
	}
	time.Sleep(50 * time.Millisecond)
	close(g.gate)
	for i, r := range append([]*batch{first}, replies...) {
		if res := r.wait(); res[0].Err != nil {
			t.Errorf("user request %d failed: %v", i, res[0].Err)
		}
	}
}
