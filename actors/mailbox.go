package actors

import (
	"runtime"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// modelMailbox is a model actor's mailbox: protoactor's unbounded priority
// mailbox (system messages first, then user messages by priority, run on
// the dispatcher, one run at a time), with one more way in, postInline,
// for a caller that waits for its answer anyway.
//
// A request that would be handed to a dispatcher worker while its caller
// parks (two goroutine hand-offs, each waking a thread on an idle core:
// about a fifth of a request's time at concurrency 1) runs instead on the
// caller's goroutine, when the actor is idle with nothing queued. Only
// that one message runs there: what arrives meanwhile (other callers'
// requests, the actor's own flushes) goes to the dispatcher afterwards, so
// a caller never serves other callers' work.
//
// State: running says a run holds the actor (a dispatcher worker's, or an
// inline caller's); only its holder pops messages and invokes the actor.
// Unlike protoactor's mailbox it has no middlewares and does not unpack
// message batches: Grove gives model actors neither.
type modelMailbox struct {
	user, system interface {
		Push(any)
		Pop() any
	}
	running             atomic.Bool
	userCount, sysCount atomic.Int32
	suspended           atomic.Bool
	invoker             actor.MessageInvoker
	dispatcher          actor.Dispatcher
}

// newModelMailbox returns a producer of model mailboxes; each one it makes
// is stored in *made when made is not nil.
func newModelMailbox(made **modelMailbox) actor.MailboxProducer {
	return func() actor.Mailbox {
		m := &modelMailbox{user: actor.NewPriorityGoringQueue(), system: actor.NewPriorityGoringQueue()}
		if made != nil {
			*made = m
		}
		return m
	}
}

// PostUserMessage queues a user message and schedules a run.
func (m *modelMailbox) PostUserMessage(msg any) {
	m.user.Push(msg)
	m.userCount.Add(1)
	m.schedule()
}

// PostSystemMessage queues a system message and schedules a run.
func (m *modelMailbox) PostSystemMessage(msg any) {
	m.system.Push(msg)
	m.sysCount.Add(1)
	m.schedule()
}

// RegisterHandlers sets the actor's invoker and the dispatcher of runs.
func (m *modelMailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
}

// Start does nothing: runs start as messages arrive.
func (m *modelMailbox) Start() {}

// UserMessageCount is the number of queued user messages.
func (m *modelMailbox) UserMessageCount() int { return int(m.userCount.Load()) }

// postInline runs msg, a user message, on the calling goroutine if the
// actor is idle with nothing queued, else queues it as PostUserMessage
// does. Messages that arrive while it runs are run by the dispatcher
// after it.
func (m *modelMailbox) postInline(msg any) {
	if !m.running.CompareAndSwap(false, true) {
		m.PostUserMessage(msg) // a run is under way: it takes msg
		return
	}
	if m.userCount.Load() != 0 || m.sysCount.Load() != 0 || m.suspended.Load() {
		// Messages came first (their posters found this run on, or the
		// last run ended just now): msg queues behind them, and the run
		// this call holds goes to the dispatcher.
		m.user.Push(msg)
		m.userCount.Add(1)
		m.dispatcher.Schedule(m.process)
		return
	}
	m.invoke(msg)
	m.idle()
}

// schedule starts a run on the dispatcher unless one is under way.
func (m *modelMailbox) schedule() {
	if m.running.CompareAndSwap(false, true) {
		m.dispatcher.Schedule(m.process)
	}
}

// process is a run on the dispatcher: it takes messages until none is
// left, then goes idle, and runs again at once for a message queued after
// its last look (whose poster found the run still on).
func (m *modelMailbox) process() {
	for {
		m.run()
		m.running.Store(false)
		if !m.waiting() || !m.running.CompareAndSwap(false, true) {
			return
		}
	}
}

// idle ends an inline run: a message queued meanwhile starts a run on the
// dispatcher.
func (m *modelMailbox) idle() {
	m.running.Store(false)
	if m.waiting() {
		m.schedule()
	}
}

// waiting reports whether a message waits that a run would take.
func (m *modelMailbox) waiting() bool {
	return m.sysCount.Load() > 0 || (!m.suspended.Load() && m.userCount.Load() > 0)
}

// invoke runs one user message; a panic goes to the actor's supervisor,
// as protoactor's mailbox does.
func (m *modelMailbox) invoke(msg any) {
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	m.invoker.InvokeUserMessage(msg)
}

// run takes system messages first, then user messages unless suspended,
// until none is left, yielding the processor every throughput messages.
func (m *modelMailbox) run() {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	i, t := 0, m.dispatcher.Throughput()
	for {
		if i > t {
			i = 0
			runtime.Gosched()
		}
		i++
		if msg = m.system.Pop(); msg != nil {
			m.sysCount.Add(-1)
			switch msg.(type) {
			case *actor.SuspendMailbox:
				m.suspended.Store(true)
			case *actor.ResumeMailbox:
				m.suspended.Store(false)
			default:
				m.invoker.InvokeSystemMessage(msg)
			}
			continue
		}
		if m.suspended.Load() {
			return
		}
		if msg = m.user.Pop(); msg == nil {
			return
		}
		m.userCount.Add(-1)
		m.invoker.InvokeUserMessage(msg)
	}
}
