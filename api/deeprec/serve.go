package deeprec

import (
	"context"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/status"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/deeprec/deeprecpb"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/transport/grpcserver"
	"github.com/groveml/grove/transport/httpserver"
)

// PathPrefix is where the HTTP API serves: POST PathPrefix + "{model}".
const PathPrefix = "/api/predict/"

// ContentType is the media type of serialized PredictRequest and
// PredictResponse bodies.
const ContentType = "application/x-protobuf"

// The API labels of the two transports, in metrics and the prediction log.
const (
	APIHTTP = "deeprec"
	APIGRPC = "deeprec-grpc"
)

// Register serves the protocol over b: on h, POST /api/predict/{model}
// (a serialized PredictRequest in, a serialized PredictResponse out;
// {model} is the model path, everything after /api/predict/, its trailing
// "/" optional) and GET /api/predict/{model} (the model's signature
// JSON, which a POST with an empty body also answers, as DeepRec's
// process() does for an empty input); on g, grove.deeprec.v1.Processor.
// Predictions (POST and Processor/Predict) need role infer, the signature
// read.
// The routes are under the reserved /api/ segment (internal/urlspace), so
// they never meet ForestFlow's /{org}/{project}/{n}/... patterns. Failures
// are plain text (ErrorText) with StatusOf's status; refusals (no or bad
// credentials, a missing role, over its limit) too.
func Register(h *httpserver.Server, g grpcserver.Registrar, b Backend) {
	a := &rest{h: h, b: b}
	h.Handle("POST "+PathPrefix+"{model...}", auth.RoleInfer, APIHTTP, a.predict)
	h.Handle("GET "+PathPrefix+"{model...}", auth.RoleRead, APIHTTP, a.signature)
	h.SetErrorWriter(APIHTTP, httpserver.TextError)
	g.Register(&deeprecpb.Processor_ServiceDesc, &service{b: b}, map[string]auth.Role{"Predict": auth.RoleInfer})
}

type rest struct {
	h *httpserver.Server
	b Backend
}

// fail answers err as text with its status (Retry-After for a full
// queue, and for a model that is loading: when it should be loaded;
// retryAfter).
func fail(w http.ResponseWriter, err error) {
	if s, ok := retryAfter(err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(s))
	}
	code, _ := StatusOf(err)
	http.Error(w, ErrorText(err), code)
}

// retryAfter is, for a failure that says when to retry, the whole seconds
// the caller should wait: when the model should be loaded for one that is
// loading (or its node back in its cluster: actors.RetryAfter), 1 for any
// other 503 (a full queue, a stopping server); false for any other. REST
// answers it as Retry-After, gRPC as the grpc-retry-pushback-ms trailer.
func retryAfter(err error) (int, bool) {
	if s, ok := actors.RetryAfter(err); ok {
		return s, true
	}
	if code, _ := StatusOf(err); code == http.StatusServiceUnavailable {
		return 1, true
	}
	return 0, false
}

// predict serves POST /api/predict/{model}. The body is a serialized
// PredictRequest whatever its Content-Type, except a JSON or text one,
// which is refused (415) as what it is; an empty body gets the signature.
// The Grove-Timeout header bounds the call; X-Request-Id and
// Grove-Config-* headers reach the prediction log.
func (a *rest) predict(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err == nil && (mt == "application/json" || strings.HasPrefix(mt, "text/")) {
			http.Error(w, "Content-Type "+mt+" is not taken here: the body is a serialized tensorflow.eas.PredictRequest ("+ContentType+")", http.StatusUnsupportedMediaType)
			return
		}
	}
	bp := a.h.Buffer()
	defer a.h.Release(bp)
	body, ok := a.h.Body(w, r, bp)
	if !ok {
		return
	}
	ctx, cancel, ok := httpserver.TimeoutContext(w, r)
	if !ok {
		return
	}
	defer cancel()
	// The request is decoded (copied) before the answer is written into
	// the same buffer.
	out, sig, err := Process(ctx, a.b, r.PathValue("model"), body, Call{API: APIHTTP, RequestID: httpserver.RequestID(w, r),
		Configs: httpserver.HeaderConfigs(nil, r.Header)}, (*bp)[:0])
	if err != nil {
		fail(w, err)
		return
	}
	*bp = out[:0]
	if sig {
		w.Header().Set("Content-Type", "application/json")
	} else {
		w.Header().Set("Content-Type", ContentType)
	}
	_, _ = w.Write(out)
}

// signature serves GET /api/predict/{model}: the signature JSON.
func (a *rest) signature(w http.ResponseWriter, r *http.Request) {
	sig, err := Signature(a.b, r.PathValue("model"), "")
	if err != nil {
		fail(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(sig)
}

// service is grove.deeprec.v1.Processor.
type service struct {
	deeprecpb.UnimplementedProcessorServer
	b Backend
}

// The service implements its generated interface, checked here at build
// time (gRPC checks it only when grpcserver.Register registers it).
var _ deeprecpb.ProcessorServer = (*service)(nil)

// Predict runs the request on the model at model_path (Predict, the
// package function); the call's deadline bounds it. Failures are
// StatusOf's code with ErrorText's message; those REST answers with
// Retry-After carry the same wait in the grpc-retry-pushback-ms trailer
// (gRFC A6), which a grpc-go client with a retry policy waits before it
// retries.
func (s *service) Predict(ctx context.Context, req *deeprecpb.ProcessorPredictRequest) (*deeprecpb.PredictResponse, error) {
	resp, err := Predict(ctx, s.b, req.GetModelPath(), req.GetRequest(), Call{API: APIGRPC, RequestID: grpcserver.RequestID(ctx)})
	if err != nil {
		if secs, ok := retryAfter(err); ok {
			grpcserver.SetRetryPushback(ctx, time.Duration(secs)*time.Second)
		}
		_, code := StatusOf(err)
		return nil, status.Error(code, ErrorText(err))
	}
	return resp, nil
}
