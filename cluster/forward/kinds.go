package forward

import (
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/groveml/grove/servables"
)

// Trailer keys of the Forward service's answers over gRPC (a Failure on
// the framed transport carries the same in its fields).
const (
	// trailerKind carries the servables.Kind name of a failure.
	trailerKind = "grove-error-kind"
	// trailerNode carries the name of the node that failed the request.
	trailerNode = "grove-node"
	// trailerRetryAfter carries, for a model that is loading, in how many
	// milliseconds a retry should find it loaded.
	trailerRetryAfter = "grove-retry-after-ms"
)

// Code is the gRPC code the Server answers a failure of kind k with. It
// follows the table of Grove's other gRPC services (api/sidecar, api/oip):
// kinds that share a code (Crashed, Execution and OutputUnsupported are
// Internal; Conflict and ReadOnly FailedPrecondition) are told apart by
// the kind the answer carries besides (a Failure's kind, the gRPC trailer
// grove-error-kind).
func Code(k servables.Kind) codes.Code {
	switch k {
	case servables.OK:
		return codes.OK
	case servables.NotFound:
		return codes.NotFound
	case servables.InvalidInput:
		return codes.InvalidArgument
	case servables.Overloaded:
		return codes.ResourceExhausted
	case servables.DeadlineExceeded:
		return codes.DeadlineExceeded
	case servables.Canceled:
		return codes.Canceled
	case servables.Unavailable:
		return codes.Unavailable
	case servables.Conflict, servables.ReadOnly:
		return codes.FailedPrecondition
	}
	return codes.Internal // OutputUnsupported, Crashed, Execution
}

// KindOfCode is the kind of a failure that says gRPC code c and no kind
// of its own (a Failure without one), or of a call its context ended (the
// deadline passed, the call canceled). A peer that refuses this node's credentials
// (Unauthenticated, PermissionDenied) or does not know the method
// (Unimplemented) is a cluster misconfiguration, Execution: the server's
// fault, not the client's, and not worth another replica. (A Server's
// refusal of a certificate naming no member carries its own kind,
// Unavailable: membership changes.)
func KindOfCode(c codes.Code) servables.Kind {
	switch c {
	case codes.OK:
		return servables.OK
	case codes.NotFound:
		return servables.NotFound
	case codes.InvalidArgument, codes.OutOfRange:
		return servables.InvalidInput
	case codes.ResourceExhausted:
		return servables.Overloaded
	case codes.DeadlineExceeded:
		return servables.DeadlineExceeded
	case codes.Canceled:
		return servables.Canceled
	case codes.Unavailable:
		return servables.Unavailable
	case codes.FailedPrecondition, codes.Aborted, codes.AlreadyExists:
		return servables.Conflict
	}
	return servables.Execution // Unknown, Internal, DataLoss, Unimplemented, Unauthenticated, PermissionDenied
}

// parseKind returns the kind named s (servables.Kind.String), if any.
func parseKind(s string) (servables.Kind, bool) {
	for k := servables.OK + 1; k.String() != "unknown"; k++ {
		if k.String() == s {
			return k, true
		}
	}
	return servables.OK, false
}

// sentinel is servables' sentinel error of kind k.
func sentinel(k servables.Kind) error {
	switch k {
	case servables.NotFound:
		return servables.ErrNotFound
	case servables.InvalidInput:
		return servables.ErrInvalidInput
	case servables.OutputUnsupported:
		return servables.ErrOutput
	case servables.Overloaded:
		return servables.ErrOverloaded
	case servables.DeadlineExceeded:
		return servables.ErrDeadlineExceeded
	case servables.Canceled:
		return servables.ErrCanceled
	case servables.Crashed:
		return servables.ErrCrashed
	case servables.Unavailable:
		return servables.ErrUnavailable
	case servables.Conflict:
		return servables.ErrConflict
	case servables.ReadOnly:
		return servables.ErrReadOnly
	}
	return servables.ErrExecution
}

// RemoteError is a forwarded request's failure: the peer's answer, or the
// failure to reach it. It wraps servables' sentinel of its Kind, so
// servables.KindOf and errors.Is(err, servables.ErrNotFound) see the kind
// the peer's model failed with (a package's own sentinels, such as
// actors.ErrModelNotFound, do not cross nodes: compare kinds).
type RemoteError struct {
	// Node and Addr name the peer: the node that answered when it said
	// so, else the peer Forward called.
	Node, Addr string
	// Kind is the failure's kind.
	Kind servables.Kind
	// Code is the gRPC status code of the failure (a Failure carries one,
	// as a status does); Unavailable when the peer could not be reached.
	Code codes.Code
	// Message is the peer's error text, or what kept the call from it.
	Message string
	// RetryAfter is, for a model loading on the peer, when the peer
	// estimates a retry should find it loaded; 0: no estimate.
	RetryAfter time.Duration
}

// RetryIn is e.RetryAfter: when a retry should find the model loaded
// (0: no estimate).
func (e *RemoteError) RetryIn() time.Duration { return e.RetryAfter }

func (e *RemoteError) Error() string {
	return fmt.Sprintf("forwarded to node %s (%s): %s", e.Node, e.Addr, e.Message)
}

// Unwrap returns servables' sentinel of e.Kind.
func (e *RemoteError) Unwrap() error { return sentinel(e.Kind) }
