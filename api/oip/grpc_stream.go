package oip

import (
	"context"
	"errors"
	"io"

	grpcstatus "google.golang.org/grpc/status"

	"github.com/groveml/grove/api/oip/oippb"
)

// maxStreamInFlight bounds the requests of one ModelStreamInfer stream
// being run or waiting to be answered; the stream stops reading while it
// is reached.
const maxStreamInFlight = 64

// ModelStreamInfer is Triton's bidirectional inference stream: each
// request read is run as ModelInfer runs it, concurrently with the
// stream's other requests (so they can be batched together), and answered
// on the response stream in the order the requests came. A failed request
// is answered in the stream, not by ending it: error_message holds the
// error and infer_response the request's id, model name and version, as
// Triton answers. The stream ends once the client has closed its side and
// every request is answered.
func (o *grpcService) ModelStreamInfer(stream oippb.GRPCInferenceService_ModelStreamInferServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	// sendInOrder holds one answer while it waits for it, so the channel
	// holds the other maxStreamInFlight-1.
	answers := make(chan chan *oippb.ModelStreamInferResponse, maxStreamInFlight-1)
	sent := make(chan error, 1)
	go func() { sent <- sendInOrder(stream, answers, cancel) }()

	recvErr := func() error {
		for {
			req, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			answer := make(chan *oippb.ModelStreamInferResponse, 1)
			select {
			case answers <- answer:
			case <-ctx.Done():
				return ctx.Err()
			}
			go func() { answer <- o.streamAnswer(ctx, req) }()
		}
	}()
	close(answers)
	sendErr := <-sent
	if sendErr != nil {
		return sendErr
	}
	return recvErr
}

// sendInOrder sends the answers in the order their channels come; on a
// failed send it cancels the stream's requests and stops.
func sendInOrder(stream oippb.GRPCInferenceService_ModelStreamInferServer, answers <-chan chan *oippb.ModelStreamInferResponse, cancel context.CancelFunc) error {
	for answer := range answers {
		if err := stream.Send(<-answer); err != nil {
			cancel()
			return err
		}
	}
	return nil
}

// ParamFinalResponse is the response parameter of Triton's stream that
// says whether an answer is the last for its request (a decoupled model may
// give several); Triton's clients read it to know a request is done.
const ParamFinalResponse = "triton_final_response"

// streamAnswer runs one request of a stream and answers it, in the stream.
// Every answer is the request's only one, so each carries
// triton_final_response true, as Triton's answers for a model that is not
// decoupled do.
func (o *grpcService) streamAnswer(ctx context.Context, req *oippb.ModelInferRequest) *oippb.ModelStreamInferResponse {
	resp, err := o.infer(ctx, req, grpcError)
	out := &oippb.ModelStreamInferResponse{InferResponse: resp}
	if err != nil {
		out.ErrorMessage = grpcstatus.Convert(err).Message()
		out.InferResponse = &oippb.ModelInferResponse{Id: req.GetId(), ModelName: req.GetModelName(), ModelVersion: req.GetModelVersion()}
	}
	if out.InferResponse.Parameters == nil {
		out.InferResponse.Parameters = make(map[string]*oippb.InferParameter, 1)
	}
	out.InferResponse.Parameters[ParamFinalResponse] = &oippb.InferParameter{ParameterChoice: &oippb.InferParameter_BoolParam{BoolParam: true}}
	return out
}
