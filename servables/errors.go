package servables

import (
	"context"
	"errors"
)

// Kind classifies a failure. It is the one vocabulary the actors, the
// runtimes and the protocols share: actors and runtimes wrap one of the
// sentinel errors below with %w, and each protocol package maps a Kind to
// its own status (an HTTP status, a gRPC code, a B&A error type) in a
// single table. A Kind says nothing about wording; messages stay with the
// error that wraps the sentinel.
type Kind uint8

// The kinds of failure.
const (
	// OK is the kind of a nil error.
	OK Kind = iota
	// NotFound: no ready model, contract or release by that name.
	NotFound
	// InvalidInput: the caller's request is wrong (tensor count, shape,
	// type or values, or a document that does not validate).
	InvalidInput
	// OutputUnsupported: the model answered with something Grove cannot
	// return (an unsupported output type, a shape that does not fit).
	OutputUnsupported
	// Overloaded: the model's queue is full; the caller should retry later.
	Overloaded
	// DeadlineExceeded: the request's deadline passed before it was
	// answered, or it waited in the queue longer than its model allows.
	DeadlineExceeded
	// Canceled: the caller went away (a closed connection, a canceled call).
	Canceled
	// Crashed: the model panicked while it held the request.
	Crashed
	// Execution: the model failed to run on inputs it accepted.
	Execution
	// Unavailable: the server or the model cannot take the request now
	// (shutting down, no servable active, reload after a crash failed).
	Unavailable
	// Conflict: the request contradicts the current state (already
	// registered, managed by the model config, a write that lost a race).
	Conflict
	// ReadOnly: the bucket cannot be written.
	ReadOnly
)

var kindNames = [...]string{
	OK:                "ok",
	NotFound:          "not_found",
	InvalidInput:      "invalid_input",
	OutputUnsupported: "output_unsupported",
	Overloaded:        "overloaded",
	DeadlineExceeded:  "deadline_exceeded",
	Canceled:          "canceled",
	Crashed:           "crashed",
	Execution:         "execution",
	Unavailable:       "unavailable",
	Conflict:          "conflict",
	ReadOnly:          "read_only",
}

// String returns the kind's snake_case name, as metrics label it.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// kindError is a sentinel error of one Kind.
type kindError struct {
	kind Kind
	msg  string
}

func (e *kindError) Error() string { return e.msg }

// NewError returns a new sentinel error of kind k with text msg. It is
// distinct from every other sentinel (errors.Is matches it by identity)
// and KindOf reports k for any error that wraps it: packages declare
// their own sentinels (an unknown contract, a model that was not
// registered) without losing the shared classification.
func NewError(k Kind, msg string) error { return &kindError{kind: k, msg: msg} }

// The sentinel errors of each kind. Wrap them with %w, never compare
// messages.
var (
	// ErrNotFound marks a request for something Grove does not serve.
	ErrNotFound = NewError(NotFound, "not found")
	// ErrInvalidInput marks an error caused by the request's tensors.
	ErrInvalidInput = NewError(InvalidInput, "invalid input")
	// ErrOutput marks a model output that cannot be returned (unsupported type).
	ErrOutput = NewError(OutputUnsupported, "unsupported output")
	// ErrOverloaded marks a request refused because its model's queue was full.
	ErrOverloaded = NewError(Overloaded, "overloaded")
	// ErrDeadlineExceeded marks a request whose deadline passed before it was answered.
	ErrDeadlineExceeded = NewError(DeadlineExceeded, "deadline exceeded")
	// ErrCanceled marks a request whose caller went away.
	ErrCanceled = NewError(Canceled, "canceled")
	// ErrCrashed marks a request the model panicked on.
	ErrCrashed = NewError(Crashed, "model crashed")
	// ErrExecution marks a model that failed to run on its inputs.
	ErrExecution = NewError(Execution, "model execution failed")
	// ErrUnavailable marks a request that cannot be served now.
	ErrUnavailable = NewError(Unavailable, "unavailable")
	// ErrConflict marks a request that contradicts the current state.
	ErrConflict = NewError(Conflict, "conflict")
	// ErrReadOnly marks a write to a bucket that cannot be written.
	ErrReadOnly = NewError(ReadOnly, "read-only")
)

// KindOf classifies err: the kind of the first sentinel it wraps (depth
// first, as errors.As searches); context.DeadlineExceeded and
// context.Canceled count as DeadlineExceeded and Canceled. An error that
// wraps no sentinel is Execution: a failure nobody classified is the
// server's, never the caller's. KindOf(nil) is OK.
func KindOf(err error) Kind {
	if err == nil {
		return OK
	}
	var ke *kindError
	if errors.As(err, &ke) {
		return ke.kind
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return Canceled
	}
	return Execution
}
