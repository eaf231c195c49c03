package actors

import (
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// goroutineID is the calling goroutine's number, from its stack's first
// line ("goroutine 7 [running]:").
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
	return id
}

// recordingInvoker records what a mailbox hands its actor and on which
// goroutine; onUser, if not nil, runs inside each user message.
type recordingInvoker struct {
	mu         sync.Mutex
	got        []any
	goroutines []string
	escalated  []any
	onUser     func(msg any)
}

func (r *recordingInvoker) record(msg any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, msg)
	r.goroutines = append(r.goroutines, goroutineID())
}

func (r *recordingInvoker) InvokeSystemMessage(msg any) { r.record(msg) }

func (r *recordingInvoker) InvokeUserMessage(msg any) {
	r.record(msg)
	if r.onUser != nil {
		r.onUser(msg)
	}
}

func (r *recordingInvoker) EscalateFailure(reason, msg any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.escalated = append(r.escalated, msg)
}

// heldDispatcher keeps the runs a mailbox schedules until the test runs
// them (runAll), each on a goroutine of its own.
type heldDispatcher struct{ runs []func() }

func (d *heldDispatcher) Schedule(fn func()) { d.runs = append(d.runs, fn) }
func (d *heldDispatcher) Throughput() int    { return 300 }

// runAll runs the scheduled runs, and those they schedule, to the end.
func (d *heldDispatcher) runAll() {
	for len(d.runs) > 0 {
		fn := d.runs[0]
		d.runs = d.runs[1:]
		done := make(chan struct{})
		go func() { defer close(done); fn() }()
		<-done
	}
}

func newTestMailbox() (*modelMailbox, *recordingInvoker, *heldDispatcher) {
	var m *modelMailbox
	newModelMailbox(&m)()
	inv, d := &recordingInvoker{}, &heldDispatcher{}
	m.RegisterHandlers(inv, d)
	return m, inv, d
}

func TestPostInlineRunsOnTheCallersGoroutineWhenTheActorIsIdle(t *testing.T) {
	m, inv, d := newTestMailbox()
	m.postInline("a")
	if !slices.Equal(inv.got, []any{"a"}) || inv.goroutines[0] != goroutineID() || len(d.runs) != 0 {
		t.Fatalf("invoked %v on goroutines %v (caller %s), %d runs scheduled; want a on the caller, none scheduled", inv.got, inv.goroutines, goroutineID(), len(d.runs))
	}
	m.postInline("b") // idle again after its run
	if !slices.Equal(inv.got, []any{"a", "b"}) || len(d.runs) != 0 {
		t.Fatalf("second inline post: invoked %v, %d runs scheduled", inv.got, len(d.runs))
	}
}

func TestPostInlineQueuesBehindARunUnderWay(t *testing.T) {
	m, inv, d := newTestMailbox()
	m.PostUserMessage("first") // its run is scheduled, not started
	m.postInline("second")
	if len(inv.got) != 0 {
		t.Fatalf("invoked %v while a run was scheduled; want nothing on the caller", inv.got)
	}
	d.runAll()
	if !slices.Equal(inv.got, []any{"first", "second"}) || inv.goroutines[1] == goroutineID() {
		t.Fatalf("invoked %v on %v; want first then second, on the dispatcher", inv.got, inv.goroutines)
	}
	if m.UserMessageCount() != 0 || m.running.Load() {
		t.Fatalf("after the run: %d queued, running %v; want 0, idle", m.UserMessageCount(), m.running.Load())
	}
}

func TestMessagesPostedDuringAnInlineRunGoToTheDispatcherAfterIt(t *testing.T) {
	m, inv, d := newTestMailbox()
	inv.onUser = func(msg any) {
		if msg == "caller" {
			m.PostUserMessage("flush") // the actor's own message, or another caller's
			m.postInline("other caller")
		}
	}
	m.postInline("caller")
	if !slices.Equal(inv.got, []any{"caller"}) || len(d.runs) != 1 {
		t.Fatalf("after the inline run: invoked %v, %d runs scheduled; want the caller's alone and one run", inv.got, len(d.runs))
	}
	d.runAll()
	if !slices.Equal(inv.got, []any{"caller", "flush", "other caller"}) {
		t.Fatalf("invoked %v, want caller, flush, other caller", inv.got)
	}
	for i, g := range inv.goroutines[1:] {
		if g == inv.goroutines[0] {
			t.Fatalf("message %v ran on the inline caller's goroutine", inv.got[i+1])
		}
	}
}

func TestPostInlineDoesNotOvertakeAQueuedSystemMessage(t *testing.T) {
	m, inv, d := newTestMailbox()
	m.PostSystemMessage("system")
	m.running.Store(false) // as if the poster's run had not been scheduled yet
	d.runs = nil
	m.postInline("user")
	if len(inv.got) != 0 || len(d.runs) != 1 {
		t.Fatalf("invoked %v, %d runs scheduled; want nothing inline and one run", inv.got, len(d.runs))
	}
	d.runAll()
	if !slices.Equal(inv.got, []any{"system", "user"}) {
		t.Fatalf("invoked %v, want the system message first", inv.got)
	}
}

func TestASuspendedMailboxRunsNothingInlineUntilResumed(t *testing.T) {
	m, inv, d := newTestMailbox()
	m.PostSystemMessage(&actor.SuspendMailbox{})
	d.runAll()
	m.postInline("user")
	d.runAll()
	if len(inv.got) != 0 {
		t.Fatalf("a suspended mailbox invoked %v", inv.got)
	}
	m.PostSystemMessage(&actor.ResumeMailbox{})
	d.runAll()
	if !slices.Equal(inv.got, []any{"user"}) {
		t.Fatalf("after resume: invoked %v, want the user message", inv.got)
	}
}

func TestAPanicInAnInlineRunGoesToTheSupervisorAndFreesTheMailbox(t *testing.T) {
	m, inv, d := newTestMailbox()
	inv.onUser = func(msg any) {
		if msg == "bad" {
			panic("test: the actor crashes")
		}
	}
	m.postInline("bad")
	if !slices.Equal(inv.escalated, []any{"bad"}) {
		t.Fatalf("escalated %v, want the message that panicked", inv.escalated)
	}
	m.postInline("good")
	if !slices.Equal(inv.got, []any{"bad", "good"}) || len(d.runs) != 0 {
		t.Fatalf("invoked %v, %d runs; want the next message inline", inv.got, len(d.runs))
	}
}
