package ba

import (
	"fmt"
	"net/http"

	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/transport/httpserver"
)

// status is how the B&A API answers a failure of one kind: the error_type
// of the item that failed, its description (a format: %[1]s is the item's
// model path, %[2]v the error) and the HTTP status of a batch response that
// holds such an item.
type status struct {
	typ   ErrorType
	desc  string
	batch int
}

// modelExecution is the sidecar's description of a model that failed.
const modelExecution = "Model Execution Error. Message: Model %[1]s encounters an exception during evaluation: %[2]v"

// statusOf is the B&A API's one table from a kind of failure to its
// answer. Item errors travel inside a 200 response, as in the sidecar,
// except that a full model queue makes it 429 (retry later). The batch
// status of Unavailable and Canceled is that of a whole batch that could
// not run (503: the server is stopping; 499 for the metrics when the
// caller went away: nobody reads it); an item whose model is unavailable
// answers inside a 200 like any item error (see Infer). A deadline that
// passed is a GRPC error, as the bidding server reports a sidecar call
// that timed out.
func statusOf(k servables.Kind) status {
	switch k {
	case servables.OK:
		return status{"", "", http.StatusOK}
	case servables.NotFound:
		return status{ModelNotFound, "Requested model '%[1]s' has not been registered", http.StatusOK}
	case servables.InvalidInput:
		// Inputs the model refuses (count, type, shape): the sidecar has
		// no such check and reports forward's exception, so this is a
		// MODEL_EXECUTION error too; a request's own malformations are
		// INPUT_PARSING errors of the parser (Item.Err, Item.InputErr).
		return status{ModelExecution, modelExecution, http.StatusOK}
	case servables.OutputUnsupported:
		return status{OutputParsing, "%[2]v", http.StatusOK}
	case servables.Overloaded:
		return status{ModelExecution, "%[2]v", http.StatusTooManyRequests}
	case servables.DeadlineExceeded:
		return status{GRPC, "DEADLINE_EXCEEDED: %[2]v", http.StatusOK}
	case servables.Canceled:
		return status{GRPC, "CANCELLED: %[2]v", httpserver.StatusClientClosedRequest}
	case servables.Unavailable:
		return status{ModelExecution, modelExecution, http.StatusServiceUnavailable}
	case servables.Conflict, servables.ReadOnly:
		return status{Unknown, "%[2]v", http.StatusOK}
	}
	return status{ModelExecution, modelExecution, http.StatusOK} // Crashed, Execution
}

// ItemError is the B&A error of an item for the model at path that failed
// with err, and the HTTP status of a batch response that holds it.
func ItemError(path string, err error) (*Error, int) {
	st := statusOf(servables.KindOf(err))
	return &Error{Type: st.typ, Description: fmt.Sprintf(st.desc, path, err)}, st.batch
}
