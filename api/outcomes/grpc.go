package outcomes

import (
	"errors"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/groveml/grove/api/outcomes/outcomespb"
	"github.com/groveml/grove/logging/outcome"
	"github.com/groveml/grove/transport/grpcserver"
)

// service is grove.v1.Outcomes.
type service struct {
	outcomespb.UnimplementedOutcomesServer
	opts Options
}

// The service implements its generated interface, checked here at build
// time (gRPC checks it only when grpcserver.Register registers it).
var _ outcomespb.OutcomesServer = (*service)(nil)

// StreamBatch is how many valid outcomes of a Report stream are kept
// before they are written and waited for: a stream's memory is bounded by
// it, however long the stream.
const StreamBatch = 1000

// MaxStreamErrors is the most outcomes a Report stream may have refused:
// the one past it ends the stream INVALID_ARGUMENT (the outcomes accepted
// before it stay stored), so that the answer stays bounded.
const MaxStreamErrors = 10000

// Report reads the stream's outcomes, writing the valid ones every
// StreamBatch and at the end, and answers with how many were stored and
// why each of the others was not (one that does not decode as a
// grove.v1.Outcome among them). A stream of no outcome, or of none
// valid, ends INVALID_ARGUMENT naming the first errors; one whose valid
// outcomes all failed to be stored ends UNAVAILABLE; with Kafka off,
// every stream ends UNAVAILABLE. An UNAVAILABLE stream carries REST's
// Retry-After wait in its grpc-retry-pushback-ms trailer (gRFC A6).
func (s *service) Report(stream outcomespb.Outcomes_ReportServer) error {
	if s.opts.Sink == nil {
		grpcserver.SetRetryPushback(stream.Context(), kafkaOffRetry)
		return status.Error(codes.Unavailable, kafkaOff)
	}
	ctx := stream.Context()
	b := newBatch()
	n := 0
	for ; ; n++ {
		// Each message is received as unknown fields and decoded here, so
		// that one that is not an outcome (a string that is not UTF-8) is
		// answered by its index, as over HTTP, rather than ending the
		// stream INTERNAL (gRPC's answer to a message it cannot decode).
		raw := new(emptypb.Empty)
		if err := stream.RecvMsg(raw); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return err
		}
		o, err := outcome.ParseProto(raw.ProtoReflect().GetUnknown())
		b.add(n, o, err, s.opts.Now())
		if len(b.valid) >= StreamBatch {
			b.flush(ctx, s.opts.Sink)
		}
		if len(b.resp.Errors) > MaxStreamErrors {
			b.flush(ctx, s.opts.Sink)
			return status.Errorf(codes.InvalidArgument, "more than %d outcomes refused, the stream is ended (%d accepted before): %s",
				MaxStreamErrors, b.resp.Accepted, summary(b.finish()))
		}
	}
	if n == 0 {
		return status.Error(codes.InvalidArgument, "no outcomes in the stream")
	}
	b.flush(ctx, s.opts.Sink)
	resp := b.finish()
	switch {
	case b.checked == 0:
		return status.Errorf(codes.InvalidArgument, "no valid outcome: %s", summary(resp))
	case resp.Accepted == 0:
		grpcserver.SetRetryPushback(ctx, notStoredRetry)
		return status.Errorf(codes.Unavailable, "no outcome stored: %s", summary(resp))
	}
	return stream.SendAndClose(resp)
}
