package actors

import (
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/groveml/grove/servables"
)

// A panic in the supervisor or the router (a bug in Grove's own code)
// must not take serving down. Left to protoactor, it would restart the
// actor: the supervisor's restart stops every model actor (its
// children) first, waits for all of them, a warm-up's forward call stuck
// in a runtime forever included, and starts again from nothing; the
// router's loses its contracts. Each of the two therefore recovers every
// panic of its Receive itself (recoverPanic): the message being handled
// is dropped, its caller answered (errInternal), and the actor goes on
// with its state and its children. A panic that escapes that (one in the
// recovery itself) resumes the actor too (resumeOnPanic, their guardian
// strategy): neither is ever restarted.

// errInternal marks a call that failed because the supervisor or the
// router panicked while handling it. Its kind is Unavailable: the call,
// made again, is handled afresh.
var errInternal = servables.NewError(servables.Unavailable, "internal error")

// recoverPanic logs, at error level with its stack, the panic v that
// the actor name (supervisor or router) recovered while handling what (a
// message, by its type, or a step), counts it in grove_actor_panics_total
// and returns the error the calls it fails get. Call it from the
// deferred function that recovered v, so that the stack is the panic's.
func recoverPanic(log *slog.Logger, m *Metrics, name, what string, v any) error {
	m.panics.WithLabelValues(name).Inc()
	log.Error("internal error: the "+name+" panicked; it drops what it was handling and goes on",
		"actor", name, "message", what, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	return fmt.Errorf("%w: the %s panicked handling %s: %v", errInternal, name, what, v)
}

// recoverJob logs, at error level with its stack, the panic v that a
// background job of the supervisor or the router, a model actor's
// reload, a shadow copy's comparison or log entry, the answer to a
// forwarded request, or a request's default_timeout_ms timer or the
// timer of its wait for an on-demand load recovered (label: fetch, load,
// config_poll, warm_up, release, forward, reload, shadow_compare,
// shadow_log, forward_reply, default_timeout or load_wait;
// what: the job, "fetch of model a/"), counts it in grove_actor_panics_total{actor=label}
// and returns the error the job fails with: that job alone fails, as it
// would on any error. Call it from the deferred function that recovered
// v, so that the stack is the panic's.
func recoverJob(log *slog.Logger, m *Metrics, label, what string, v any) error {
	m.panics.WithLabelValues(label).Inc()
	log.Error("internal error: the "+what+" panicked; it fails alone and the server goes on",
		"actor", label, "job", what, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	return fmt.Errorf("%w: the %s panicked: %v", errInternal, what, v)
}

// messageType names a message for recoverPanic: its Go type.
func messageType(msg any) string { return fmt.Sprintf("%T", msg) }

// resumeOnPanic is the guardian strategy of the supervisor and the
// router, both spawned from the root: a failure protoactor sees (a panic
// their own recovery let through) resumes the actor, which keeps its
// state and its children and drops the message. protoactor's default
// for a root actor restarts it, and stops it for good after ten
// failures in ten seconds.
type resumeOnPanic struct {
	log     *slog.Logger
	metrics *Metrics
}

// HandleFailure resumes the failed actor, logs and counts the failure,
// and publishes the event as protoactor's strategies do.
func (g *resumeOnPanic) HandleFailure(as *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason, msg any) {
	g.metrics.panics.WithLabelValues(child.Id).Inc()
	g.log.Error("internal error: an actor failed outside its own recovery; it is resumed, keeping its state",
		"actor", child.Id, "message", messageType(msg), "panic", fmt.Sprint(reason))
	as.EventStream.Publish(&actor.SupervisorEvent{Child: child, Reason: reason, Directive: actor.ResumeDirective})
	sup.ResumeChildren(child)
}
