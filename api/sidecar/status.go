package sidecar

import (
	"errors"

	"google.golang.org/grpc/codes"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/servables"
)

// code is the sidecar service's one table from a kind of failure to a gRPC
// code, for the calls that fail (Predict only when the batch cannot run).
// A registration in conflict with the state is ALREADY_EXISTS for a path
// already registered and FAILED_PRECONDITION for one the model config
// manages; a model that cannot be loaded is INTERNAL, as in the sidecar.
func code(err error) codes.Code {
	switch servables.KindOf(err) {
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
	case servables.Conflict:
		if errors.Is(err, actors.ErrAlreadyRegistered) {
			return codes.AlreadyExists
		}
		return codes.FailedPrecondition
	case servables.ReadOnly:
		return codes.FailedPrecondition
	}
	return codes.Internal // OutputUnsupported, Crashed, Execution
}
