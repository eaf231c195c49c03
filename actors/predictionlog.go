package actors

import (
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/servables"
)

// PredictionLog turns the answers the router hands over into prediction
// events and logs those its policy selects to the prediction log's Kafka
// producer. It implements PredictionSink.
type PredictionLog struct {
	// Producer receives the events; a nil Producer discards them.
	Producer *logging.Producer
	// Direct is the policy for calls addressed to a model path (B&A, OIP);
	// contract calls use their servable's own logging settings.
	Direct logging.Policy
	// KeyBy chooses every event's record key (prediction_log.key_by): the
	// policy's key features (conf.KeyByKeyFeatures, the zero value), or the
	// event's request_id (conf.KeyByRequestID), the join key of outcomes.
	KeyBy conf.KeyBy
}

var _ PredictionSink = (*PredictionLog)(nil)

// LogPrediction logs one answered request if the policy selects it. It never blocks.
func (s *PredictionLog) LogPrediction(req *Request, res *Result, served bool) {
	if s == nil || s.Producer == nil {
		return
	}
	policy := s.Direct
	if req.Logging != nil {
		policy = logging.PolicyFromServable(*req.Logging)
	}
	if !policy.Decide(nil) {
		return
	}
	ev := PredictionEvent(req, res, served)
	s.Producer.LogTraced(ev, s.key(policy, req, ev), req.TraceParent)
}

// key is the record key of ev, the event of req logged under policy: as
// KeyBy chooses, the request id as the event carries it (nil when there
// is none) or the policy's key features.
func (s *PredictionLog) key(policy logging.Policy, req *Request, ev *grovepb.PredictionEvent) []byte {
	if s.KeyBy == conf.KeyByRequestID {
		if ev.RequestId == "" {
			return nil
		}
		return []byte(ev.RequestId)
	}
	return policy.Key(req.Configs)
}

// PredictionEvent builds the prediction event of one answered request.
// The event shares tensor memory with req and res; log it before they
// change.
func PredictionEvent(req *Request, res *Result, served bool) *grovepb.PredictionEvent {
	ev := &grovepb.PredictionEvent{
		RequestId:      validUTF8(req.RequestID),
		Item:           int64(req.Item),
		Api:            req.API,
		ModelPath:      req.ModelPath,
		Contract:       req.Contract,
		ReleaseVersion: req.Release,
		ModelChecksum:  res.Checksum,
		Served:         served,
		Inputs:         logging.TensorsToProto(req.Inputs),
		Outputs:        logging.TensorsToProto(res.Outputs),
		QueueLatency:   durationpb.New(res.Queued),
		ComputeLatency: durationpb.New(res.Compute),
	}
	if !req.Received.IsZero() {
		ev.RequestTimestamp = timestamppb.New(req.Received)
	}
	if len(req.Configs) > 0 {
		ev.Configs = make(map[string]string, len(req.Configs))
		for k, v := range req.Configs {
			ev.Configs[validUTF8(k)] = validUTF8(v)
		}
	}
	if res.Err != nil {
		ev.Error = &grovepb.Error{Type: errorType(res.Err), Message: validUTF8(res.Err.Error())}
	}
	if c := res.Comparison; c != nil {
		ev.ComparedRequestId, ev.ComparedReleaseVersion, ev.Comparison = validUTF8(c.RequestID), c.Release, comparisonToProto(c)
	}
	return ev
}

// comparisonToProto is a shadow execution's comparison in the event.
func comparisonToProto(c *ShadowComparison) *grovepb.ShadowComparison {
	out := &grovepb.ShadowComparison{ChampionFailed: c.ChampionFailed, Tolerance: c.Tolerance}
	if !c.ChampionFailed {
		out.ChampionComputeLatency = durationpb.New(c.ChampionCompute)
	}
	if len(c.Outputs) > 0 {
		out.Outputs = make([]*grovepb.OutputComparison, len(c.Outputs))
	}
	for i, d := range c.Outputs {
		out.Outputs[i] = &grovepb.OutputComparison{Name: validUTF8(d.Name), Mismatch: validUTF8(d.Mismatch), Rows: int64(d.Rows),
			MeanAbsDiff: d.MeanAbsDiff(), MaxAbsDiff: d.MaxAbsDiff, NonFinite: int64(d.NonFinite), RowsWithinTolerance: int64(d.Within),
			Score: d.Score, RowsAgreeing: int64(d.Agree), Bytes: d.Bytes, RowsEqual: int64(d.Equal)}
	}
	return out
}

// errorType is the prediction event's error type for err, by its kind, in
// the vocabulary prediction_event.proto documents: INPUT_PARSING for inputs
// the model refused (whatever the protocol: a B&A answer reports those as
// MODEL_EXECUTION, as the sidecar does, an OIP one as a 400), and a failure
// of any other kind (a crash, a full queue, a deadline) is MODEL_EXECUTION.
// It is "" for nil.
func errorType(err error) string {
	switch servables.KindOf(err) {
	case servables.OK:
		return ""
	case servables.NotFound:
		return "MODEL_NOT_FOUND"
	case servables.InvalidInput:
		return "INPUT_PARSING"
	case servables.OutputUnsupported:
		return "OUTPUT_PARSING"
	}
	return "MODEL_EXECUTION"
}

// validUTF8 replaces invalid UTF-8 (from HTTP headers, say), which protobuf
// strings cannot hold.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
