package ba

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/servables"
)

func TestItemErrorMapsEveryKind(t *testing.T) {
	for _, c := range []struct {
		err   error
		typ   ErrorType
		desc  string
		batch int
	}{
		{fmt.Errorf("%w: Requested model 'm/' has not been registered", actors.ErrModelNotFound), ModelNotFound, "Requested model 'm/' has not been registered", 200},
		{fmt.Errorf("%w: the model takes 2 inputs", servables.ErrInvalidInput), ModelExecution, "Model Execution Error. Message: Model m/ encounters an exception during evaluation: invalid input: the model takes 2 inputs", 200},
		{fmt.Errorf("%w: output 0 is a string", servables.ErrOutput), OutputParsing, "unsupported output: output 0 is a string", 200},
		{fmt.Errorf("%w: queue full", servables.ErrOverloaded), ModelExecution, "overloaded: queue full", http.StatusTooManyRequests},
		{fmt.Errorf("%w: 100ms passed", servables.ErrDeadlineExceeded), GRPC, "DEADLINE_EXCEEDED: deadline exceeded: 100ms passed", 200},
		{fmt.Errorf("%w: client left", servables.ErrCanceled), GRPC, "CANCELLED: canceled: client left", 499},
		{fmt.Errorf("%w: panic: boom", servables.ErrCrashed), ModelExecution, "Model Execution Error. Message: Model m/ encounters an exception during evaluation: model crashed: panic: boom", 200},
		{fmt.Errorf("%w: RuntimeError", servables.ErrExecution), ModelExecution, "Model Execution Error. Message: Model m/ encounters an exception during evaluation: model execution failed: RuntimeError", 200},
		{fmt.Errorf("nobody classified this"), ModelExecution, "Model Execution Error. Message: Model m/ encounters an exception during evaluation: nobody classified this", 200},
		{fmt.Errorf("%w: model m/ stopped", actors.ErrStopped), ModelExecution, "Model Execution Error. Message: Model m/ encounters an exception during evaluation: server is shutting down: model m/ stopped", 503},
		{servables.ErrConflict, Unknown, "conflict", 200},
		{servables.ErrReadOnly, Unknown, "read-only", 200},
	} {
		e, batch := ItemError("m/", c.err)
		if e.Type != c.typ || e.Description != c.desc || batch != c.batch {
			t.Errorf("%v (%v): %s %q batch %d\nwant %s %q batch %d", c.err, servables.KindOf(c.err), e.Type, e.Description, batch, c.typ, c.desc, c.batch)
		}
	}
}
