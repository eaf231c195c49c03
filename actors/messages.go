package actors

import (
	"context"
	"time"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/routing/quality"
	"github.com/groveml/grove/servables"
)

// Mailbox priorities (protoactor: 0..7, higher first).
const (
	priorityConfig int8 = 7
	priorityUser   int8 = 6
	priorityWarmUp int8 = 3
	priorityShadow int8 = 1
)

// Errors a Result can carry besides the servable's own. Each has a
// servables.Kind (see servables.KindOf), which is what the protocols map.
var (
	// ErrModelNotFound means no ready model is served at the requested path (NotFound).
	ErrModelNotFound = servables.NewError(servables.NotFound, "model not found")
	// ErrOverloaded means the model's queue was full; the caller should retry later.
	ErrOverloaded = servables.ErrOverloaded
	// ErrModelCrashed means the model panicked while holding the request.
	ErrModelCrashed = servables.ErrCrashed
	// ErrStopped means the server is shutting down (Unavailable).
	ErrStopped = servables.NewError(servables.Unavailable, "server is shutting down")
)

// Request is one item of a batch: the inputs for one model.
type Request struct {
	// API names the front end the request came in on ("ba", ...), for metrics and logs.
	API       string
	ModelPath string
	Inputs    []servables.Tensor
	// RequestID identifies the API call the request is part of.
	RequestID string
	// Item is the request's position in its API call's batch (from 0, the
	// B&A batch's items in order); 0 when the call is one item. The
	// prediction log records it, and its shadow copies keep it.
	Item int
	// Shadows get a copy of this request at low priority; their answers are only logged.
	Shadows []ShadowTarget
	// Contract ("org/project/n") and Release name the contract servable that
	// answers, empty for direct model calls; Logging is that servable's
	// prediction log settings (nil: the server's default for direct calls).
	Contract, Release string
	Logging           *modelconfig.ServableLogging
	// Configs are the caller's key/value settings (B&A "configs", Grove-Config-* headers);
	// the prediction log keys events by some of them.
	Configs map[string]string
	// Positional says the protocol gives inputs in the model's order, as
	// the B&A inference sidecar does for PyTorch: a model whose runtime
	// takes inputs by position (servables.Metadata.ByPosition) gets them
	// unnamed, whatever their names (which stay for the prediction log).
	// Other models, and requests without it, bind named inputs by name.
	Positional bool
	// TypeNamed says the inputs are named after their types, as
	// ForestFlow's schema entries are, not after the model's inputs: a
	// model that has none of those names among its inputs gets them by
	// position (one that has them all binds them by name).
	TypeNamed bool
	// TraceParent is the W3C traceparent of the call's trace when it has
	// one (set by System.Infer before the prediction log sees the
	// request), which the log passes on with the event.
	TraceParent string
	// Replica, when 1 or more, asks for replica (Replica-1) modulo the
	// model's replicas instead of the least busy one: DeepRec's session
	// selection (package processor). 0 leaves the choice to Grove.
	Replica int
	// Received is when the request entered the actor system (its batch
	// was made), unless the caller set it: its prediction events'
	// request_timestamp, which its shadow copies keep, so that the
	// outcome join gives them the served prediction's window however long
	// they waited to run.
	Received time.Time
}

// ShadowTarget is a contract servable that gets a copy of a request.
type ShadowTarget struct {
	ModelPath, Release string
	Logging            *modelconfig.ServableLogging
	// windows, if not nil, keep the servable's comparisons with the
	// answers callers got (the router sets it for contract shadows).
	windows *compareWindows
}

// PredictionSink receives the requests and answers that reached a model, for
// the prediction log. LogPrediction must not block.
type PredictionSink interface {
	LogPrediction(req *Request, res *Result, served bool)
}

// Result is the answer to one Request.
type Result struct {
	ModelPath string
	// ContentPath is the path of the content that answered: ModelPath,
	// or for a versioned entry's path the version that ran the request
	// ("pcvr/3/").
	ContentPath string
	// Checksum identifies the model content that answered.
	Checksum string
	Outputs  []servables.Tensor
	// UnnamedOutputs is the answering model's
	// servables.Metadata.UnnamedOutputs: the Outputs' names are
	// placeholders (output_0, ...), which protocols whose answers carry no
	// name for such outputs (B&A) leave out.
	UnnamedOutputs bool
	Err            error
	// Queued is the time spent in the model's mailbox, Compute the forward time.
	Queued, Compute time.Duration
	// Comparison, for a shadow execution, is how it compared with the
	// answer the caller got for the same request; nil when it was not
	// compared.
	Comparison *ShadowComparison
}

// ShadowComparison is how one shadow execution compared with the answer
// the caller got for the same request (the champion's), for the
// prediction log.
type ShadowComparison struct {
	// RequestID is the request id of the answer compared with; Release
	// the contract release that gave it.
	RequestID, Release string
	// ChampionFailed: the caller got an error or no answer in time, so
	// nothing was compared.
	ChampionFailed bool
	// ChampionCompute is the champion's forward time for the request.
	ChampionCompute time.Duration
	// Tolerance is the largest difference of a value within tolerance.
	Tolerance float64
	// Outputs compare each output; empty when either side failed.
	Outputs []quality.OutputDiff
}

// predict asks a model actor to run one forward call. done is called exactly
// once, from the model actor's goroutine.
type predict struct {
	inputs   []servables.Tensor
	priority int8
	enqueued time.Time
	// ctx is the caller's context (nil: none, as for warm-up); deadline,
	// if not zero, is when the answer is no longer wanted (deadline.go).
	ctx      context.Context
	deadline time.Time
	// replica, when 1 or more, picks the replica (replica-1) modulo their
	// number; 0: the least busy (content.send).
	replica int
	done    func(outputs []servables.Tensor, err error, queued, compute time.Duration)
	// rows is set by the model actor before done when the request ran in
	// a dynamic batch: the rows of the whole forward call (0: it ran
	// alone), for its trace.
	rows int
	// alone is set on the requests of a batch that panicked the model:
	// each then runs in a forward call of its own, so that the one that
	// panics fails alone.
	alone bool
}

// GetPriority places the message in the priority mailbox.
func (p *predict) GetPriority() int8 { return p.priority }
