package oip

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/transport/httpserver"
)

// triton is a Backend with Triton-facing detail: an ONNX model "pctr" in
// versions 1 and 2 (batched), a TorchScript model "ts" with no known
// signature (not batched), statistics for pctr/2/ and a failed "broken"
// model in the status. Infer answers output y = x, or the error of the
// request's id in errs; a request whose id is in wait blocks until that
// channel is closed.
type triton struct {
	errs map[string]error
	wait map[string]chan struct{}
}

var tritonSignature = servables.Metadata{Runtime: "onnx",
	Inputs:  []servables.TensorSpec{{Name: "x", DType: servables.Float32, Shape: []int64{-1, 4}}},
	Outputs: []servables.TensorSpec{{Name: "y", DType: servables.Int64, Shape: []int64{-1}}}}

func (f *triton) Infer(ctx context.Context, reqs []actors.Request) ([]actors.Result, error) {
	r := reqs[0]
	if ch := f.wait[r.RequestID]; ch != nil {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			return nil, fmt.Errorf("request %s waited 5s for another: the stream does not run its requests concurrently", r.RequestID)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	out := r.Inputs[0]
	out.Name = "y"
	return []actors.Result{{ModelPath: r.ModelPath, Outputs: []servables.Tensor{out}, Err: f.errs[r.RequestID]}}, nil
}
func (*triton) ModelPaths() []string                { return []string{"pctr/1/", "pctr/2/", "ts/"} }
func (*triton) NewestVersion(string) (string, bool) { return "", false }
func (*triton) ModelMetadata(path string) (servables.Metadata, string, bool) {
	if path == "ts/" {
		return servables.Metadata{Runtime: "torchscript", Inputs: []servables.TensorSpec{{Name: "input"}}, Outputs: []servables.TensorSpec{{Name: "output_0"}}}, "", true
	}
	return tritonSignature, "", true
}
func (*triton) ModelServing(path string) (actors.ModelServing, bool) {
	if path == "ts/" {
		return actors.ModelServing{Replicas: 1, MaxBatchRows: 1}, true
	}
	return actors.ModelServing{Replicas: 3, MaxBatchRows: 16, MaxQueueDelay: 250 * time.Microsecond}, true
}
func (*triton) ModelStats(path string) (actors.ModelStats, bool) {
	if path != "pctr/2/" {
		return actors.ModelStats{}, true
	}
	return actors.ModelStats{LastInference: time.UnixMilli(1_700_000_000_123), Inferences: 12, Executions: 5,
		Success: actors.Duration{Count: 6, Total: 6000}, Fail: actors.Duration{Count: 1, Total: 70},
		Queue: actors.Duration{Count: 6, Total: 600}, Compute: actors.Duration{Count: 6, Total: 3000}}, true
}
func (*triton) Status() actors.Status {
	return actors.Status{Models: []actors.ModelStatus{{Path: "pctr/1/", State: actors.StateReady}, {Path: "pctr/2/", State: actors.StateReady},
		{Path: "ts/", State: actors.StateEvicting}, {Path: "broken/", State: actors.StateFailed, LastError: "no runtime accepts files a.bin"}}}
}
func (*triton) Ready() bool { return true }

// restGet answers GET path on the REST API over b.
func restGet(t *testing.T, b Backend, method, path, body string) (int, string) {
	t.Helper()
	h := httpserver.New(httpserver.Options{})
	Register(h, noGRPC{}, b, "1.0", nil)
	rec := httptest.NewRecorder()
	h.Handler().ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader(body)))
	return rec.Code, rec.Body.String()
}

func TestModelConfigIsTritonsJSONWithBatchDimensionLeftOut(t *testing.T) {
	code, body := restGet(t, &triton{}, "GET", "/v2/models/pctr/config", "")
	if code != 200 {
		t.Fatalf("HTTP %d %s", code, body)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	// Triton's field names and conventions, as tritonclient reads them:
	// enums by name, 64-bit integers as numbers, defaults written.
	for _, want := range []string{
		`"name":"pctr"`, `"platform":"onnxruntime_onnx"`, `"backend":"onnxruntime"`, `"max_batch_size":16`,
		`"input":[{"allow_ragged_batch":false,"data_type":"TYPE_FP32","dims":[4],"format":"FORMAT_NONE","is_non_linear_format_io":false,"is_shape_tensor":false,"name":"x","optional":false}]`,
		`"output":[{"data_type":"TYPE_INT64","dims":[],"is_non_linear_format_io":false,"is_shape_tensor":false,"label_filename":"","name":"y"}]`,
		`"dynamic_batching":{"default_priority_level":0,"max_queue_delay_microseconds":250,"preferred_batch_size":[],"preserve_ordering":false,"priority_levels":0,"priority_queue_policy":{}}`,
		`"instance_group":[{"count":3,"gpus":[],"host_policy":"","kind":"KIND_CPU","name":"pctr_0","passive":false,"profile":[],"secondary_devices":[]}]`,
		`"version_policy":{"all":{}}`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("config lacks %s:\n%s", want, body)
		}
	}
	// The same configuration as gRPC's: the JSON reads back into the message.
	var fromJSON oippb.ModelConfig
	if err := protojson.Unmarshal([]byte(body), &fromJSON); err != nil {
		t.Fatal(err)
	}
	resp, err := (&grpcService{b: &triton{}}).ModelConfig(t.Context(), &oippb.ModelConfigRequest{Name: "pctr", Version: "2"})
	if err != nil || !proto.Equal(resp.GetConfig(), &fromJSON) {
		t.Errorf("gRPC ModelConfig %v (%v) differs from REST's %v", resp.GetConfig(), err, &fromJSON)
	}
}

func TestModelConfigOfAnUnbatchedModelKeepsEveryDimension(t *testing.T) {
	sig := tritonSignature
	cfg := modelConfig(routing.ModelVersion{Path: "m/", Name: "m", Version: "1"}, sig, actors.ModelServing{Replicas: 1, MaxBatchRows: 1})
	if cfg.MaxBatchSize != 0 || cfg.GetDynamicBatching() != nil || len(cfg.Input[0].Dims) != 2 || cfg.Input[0].Dims[0] != -1 || cfg.Input[0].Dims[1] != 4 {
		t.Errorf("unbatched config %v: want max_batch_size 0, no dynamic_batching, dims [-1 4]", cfg)
	}
	// A model whose first dimension is fixed takes no batches of rows.
	fixed := servables.Metadata{Runtime: "onnx", Inputs: []servables.TensorSpec{{Name: "x", DType: servables.Float32, Shape: []int64{1, 4}}},
		Outputs: tritonSignature.Outputs}
	cfg = modelConfig(routing.ModelVersion{Path: "m/", Name: "m", Version: "1"}, fixed, actors.ModelServing{Replicas: 1, MaxBatchRows: 64})
	if cfg.MaxBatchSize != 0 || cfg.GetDynamicBatching() != nil || len(cfg.Input[0].Dims) != 2 || len(cfg.Output[0].Dims) != 1 {
		t.Errorf("config of a model that takes [1 4]: %v, want max_batch_size 0 and every dimension", cfg)
	}
	// TorchScript without a known signature: what is not known is said so.
	code, body := restGet(t, &triton{}, "GET", "/v2/models/ts/versions/1/config", "")
	if code != 200 || !strings.Contains(body, `"platform":"pytorch_libtorch"`) || !strings.Contains(body, `"backend":"pytorch"`) ||
		!strings.Contains(body, `"max_batch_size":0`) || !strings.Contains(body, `"data_type":"TYPE_INVALID","dims":[-1]`) || strings.Contains(body, "dynamic_batching") {
		t.Errorf("TorchScript config: HTTP %d %s", code, body)
	}
}

// TestModelConfigListsTheRuntimesParameters: what the runtime read from
// the model file (an XGBoost model's objective, feature names) is the
// configuration's parameters, each a string_value, over REST and gRPC.
func TestModelConfigListsTheRuntimesParameters(t *testing.T) {
	meta := servables.Metadata{Runtime: "xgboost", Inputs: tritonSignature.Inputs, Outputs: tritonSignature.Outputs,
		Parameters: map[string]string{"objective": "binary:logistic", "feature_names": `["a","b","c","d"]`}}
	cfg := modelConfig(routing.ModelVersion{Path: "m/", Name: "m", Version: "1"}, meta, actors.ModelServing{Replicas: 1, MaxBatchRows: 8})
	body, err := AppendModelConfigJSON(nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := `"parameters":{"feature_names":{"string_value":"[\"a\",\"b\",\"c\",\"d\"]"},"objective":{"string_value":"binary:logistic"}}`; !strings.Contains(string(body), want) {
		t.Errorf("config lacks %s:\n%s", want, body)
	}
	if got := cfg.GetParameters()["objective"].GetStringValue(); got != "binary:logistic" {
		t.Errorf("gRPC config's objective parameter %q", got)
	}
	// A runtime with nothing to add: no parameters.
	if cfg := modelConfig(routing.ModelVersion{Path: "m/", Name: "m", Version: "1"}, tritonSignature, actors.ModelServing{Replicas: 1}); len(cfg.GetParameters()) != 0 {
		t.Errorf("parameters %v for a model without any", cfg.GetParameters())
	}
}

func TestConfigDataTypesAreTYPEAndTheOIPName(t *testing.T) {
	for _, dt := range []servables.DType{servables.Float32, servables.Float64, servables.Int8, servables.Int16, servables.Int32, servables.Int64, servables.Bool, servables.Uint8} {
		name, _ := Datatype(dt)
		if got := configDataType(dt).String(); got != "TYPE_"+name {
			t.Errorf("%v: %s, want TYPE_%s", dt, got, name)
		}
	}
	if got := configDataType(servables.Unknown); got != oippb.DataType_TYPE_INVALID {
		t.Errorf("unknown dtype: %v", got)
	}
}

func TestModelConfigOfAnUnknownModelIsNotFound(t *testing.T) {
	code, body := restGet(t, &triton{}, "GET", "/v2/models/pctr/versions/9/config", "")
	if code != 404 || body != `{"error":"Request for unknown model: 'pctr' version 9 is not found"}` {
		t.Errorf("REST: %d %s", code, body)
	}
	_, err := (&grpcService{b: &triton{}}).ModelConfig(t.Context(), &oippb.ModelConfigRequest{Name: "nope"})
	if st := grpcstatus.Convert(err); st.Code() != codes.NotFound || st.Message() != "Request for unknown model: 'nope' is not found" {
		t.Errorf("gRPC: %v", err)
	}
}

func TestModelStatisticsOverGRPCAreRESTsNumbers(t *testing.T) {
	g := &grpcService{b: &triton{}}
	for _, c := range []struct{ path, name, version string }{
		{"/v2/models/stats", "", ""},
		{"/v2/models/pctr/stats", "pctr", ""},
		{"/v2/models/pctr/versions/2/stats", "pctr", "2"},
	} {
		code, body := restGet(t, &triton{}, "GET", c.path, "")
		if code != 200 {
			t.Fatalf("%s: HTTP %d %s", c.path, code, body)
		}
		var fromREST oippb.ModelStatisticsResponse
		if err := protojson.Unmarshal([]byte(body), &fromREST); err != nil {
			t.Fatalf("%s: %v\n%s", c.path, err, body)
		}
		resp, err := g.ModelStatistics(t.Context(), &oippb.ModelStatisticsRequest{Name: c.name, Version: c.version})
		if err != nil {
			t.Fatal(err)
		}
		// REST writes the durations gRPC leaves at zero only as they are.
		if !sameStats(resp, &fromREST) {
			t.Errorf("%s: gRPC %v, REST %v", c.path, resp, &fromREST)
		}
	}
	resp, _ := g.ModelStatistics(t.Context(), &oippb.ModelStatisticsRequest{Name: "pctr", Version: "2"})
	st := resp.GetModelStats()[0]
	if st.GetInferenceCount() != 12 || st.GetExecutionCount() != 5 || st.GetLastInference() != 1_700_000_000_123 ||
		st.GetInferenceStats().GetSuccess().GetNs() != 6000 || st.GetInferenceStats().GetFail().GetCount() != 1 ||
		st.GetInferenceStats().GetQueue().GetNs() != 600 || st.GetInferenceStats().GetComputeInfer().GetNs() != 3000 {
		t.Errorf("pctr/2 statistics %v", st)
	}
	if _, err := g.ModelStatistics(t.Context(), &oippb.ModelStatisticsRequest{Name: "nope"}); grpcstatus.Code(err) != codes.NotFound {
		t.Errorf("statistics of an unknown model: %v", err)
	}
}

// sameStats compares statistics on the fields both APIs carry.
func sameStats(a, b *oippb.ModelStatisticsResponse) bool {
	if len(a.GetModelStats()) != len(b.GetModelStats()) {
		return false
	}
	for i, x := range a.GetModelStats() {
		y := b.GetModelStats()[i]
		xs, ys := x.GetInferenceStats(), y.GetInferenceStats()
		if x.GetName() != y.GetName() || x.GetVersion() != y.GetVersion() || x.GetLastInference() != y.GetLastInference() ||
			x.GetInferenceCount() != y.GetInferenceCount() || x.GetExecutionCount() != y.GetExecutionCount() {
			return false
		}
		for _, d := range [][2]*oippb.StatisticDuration{{xs.GetSuccess(), ys.GetSuccess()}, {xs.GetFail(), ys.GetFail()},
			{xs.GetQueue(), ys.GetQueue()}, {xs.GetComputeInput(), ys.GetComputeInput()}, {xs.GetComputeInfer(), ys.GetComputeInfer()},
			{xs.GetComputeOutput(), ys.GetComputeOutput()}} {
			if d[0].GetCount() != d[1].GetCount() || d[0].GetNs() != d[1].GetNs() {
				return false
			}
		}
	}
	return true
}

func TestRepositoryIndexOverGRPCIsRESTs(t *testing.T) {
	g := &grpcService{b: &triton{}}
	for _, ready := range []bool{false, true} {
		code, body := restGet(t, &triton{}, "POST", "/v2/repository/index", fmt.Sprintf(`{"ready": %v}`, ready))
		var fromREST oippb.RepositoryIndexResponse
		if err := protojson.Unmarshal([]byte(`{"models":`+body+`}`), &fromREST); code != 200 || err != nil {
			t.Fatalf("REST: %d %s %v", code, body, err)
		}
		resp, err := g.RepositoryIndex(t.Context(), &oippb.RepositoryIndexRequest{Ready: ready})
		if err != nil || !proto.Equal(resp, &fromREST) {
			t.Errorf("ready %v: gRPC %v (%v), REST %v", ready, resp, err, &fromREST)
		}
	}
	resp, _ := g.RepositoryIndex(t.Context(), &oippb.RepositoryIndexRequest{})
	if m := resp.GetModels(); len(m) != 4 || m[3].GetName() != "broken" || m[3].GetState() != "UNAVAILABLE" || m[3].GetReason() != "no runtime accepts files a.bin" {
		t.Errorf("index %v", resp)
	}
	_, err := g.RepositoryIndex(t.Context(), &oippb.RepositoryIndexRequest{RepositoryName: "other"})
	if st := grpcstatus.Convert(err); st.Code() != codes.Unimplemented || !strings.Contains(st.Message(), "'repository_name' specification is not supported") {
		t.Errorf("repository_name: %v", err)
	}
}

func TestServerMetadataListsTheSameServedExtensionsOverRESTAndGRPC(t *testing.T) {
	_, body := restGet(t, &triton{}, "GET", "/v2", "")
	var doc struct{ Extensions []string }
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatal(err)
	}
	resp, err := (&grpcService{b: &triton{}}).ServerMetadata(t.Context(), &oippb.ServerMetadataRequest{})
	if err != nil || strings.Join(resp.GetExtensions(), ",") != strings.Join(doc.Extensions, ",") ||
		strings.Join(doc.Extensions, ",") != "binary_tensor_data,model_configuration,statistics" {
		t.Errorf("REST %v, gRPC %v", doc.Extensions, resp.GetExtensions())
	}
}

// fp32Input is one FP32 input x of shape [1, 4].
func fp32Input() []*oippb.ModelInferRequest_InferInputTensor {
	return []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 4},
		Contents: &oippb.InferTensorContents{Fp32Contents: []float32{1, 2, 3, 4}}}}
}

func TestExtensionParametersAreRefusedAsRESTRefusesThem(t *testing.T) {
	param := &oippb.InferParameter{ParameterChoice: &oippb.InferParameter_Int64Param{Int64Param: 2}}
	region := &oippb.InferParameter{ParameterChoice: &oippb.InferParameter_StringParam{StringParam: "r"}}
	for _, c := range []struct {
		name string
		req  *oippb.ModelInferRequest
		rest string // the same request over REST
	}{
		{"class_count", &oippb.ModelInferRequest{ModelName: "pctr", Inputs: fp32Input(),
			Outputs: []*oippb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y", Parameters: map[string]*oippb.InferParameter{"classification": param}}}},
			`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}],"outputs":[{"name":"y","parameters":{"classification":2}}]}`},
		{"output shared memory", &oippb.ModelInferRequest{ModelName: "pctr", Inputs: fp32Input(),
			Outputs: []*oippb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y", Parameters: map[string]*oippb.InferParameter{"shared_memory_region": region}}}},
			`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"data":[1,2,3,4]}],"outputs":[{"name":"y","parameters":{"shared_memory_region":"r"}}]}`},
		{"input shared memory", &oippb.ModelInferRequest{ModelName: "pctr", Inputs: []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: []int64{1, 4},
			Parameters: map[string]*oippb.InferParameter{"shared_memory_region": region, "shared_memory_byte_size": param}}}},
			`{"inputs":[{"name":"x","datatype":"FP32","shape":[1,4],"parameters":{"shared_memory_region":"r","shared_memory_byte_size":16}}]}`},
	} {
		code, body := restGet(t, &triton{}, "POST", "/v2/models/pctr/infer", c.rest)
		var doc struct{ Error string }
		if err := json.Unmarshal([]byte(body), &doc); code != 400 || err != nil {
			t.Fatalf("%s: REST %d %s", c.name, code, body)
		}
		_, err := (&grpcService{b: &triton{}}).ModelInfer(t.Context(), c.req)
		if st := grpcstatus.Convert(err); st.Code() != codes.InvalidArgument || st.Message() != doc.Error {
			t.Errorf("%s: gRPC %v, want INVALID_ARGUMENT %q as REST answers", c.name, err, doc.Error)
		}
	}
}

func TestUnservedMethodsSayWhy(t *testing.T) {
	g := &grpcService{b: &triton{}}
	ctx := t.Context()
	for _, c := range []struct {
		err  error
		code codes.Code
		want string
	}{
		{second(g.SystemSharedMemoryStatus(ctx, &oippb.SystemSharedMemoryStatusRequest{})), codes.Unimplemented, "no shared memory extension"},
		{second(g.SystemSharedMemoryRegister(ctx, &oippb.SystemSharedMemoryRegisterRequest{})), codes.Unimplemented, "no shared memory extension"},
		{second(g.SystemSharedMemoryUnregister(ctx, &oippb.SystemSharedMemoryUnregisterRequest{})), codes.Unimplemented, "no shared memory extension"},
		{second(g.CudaSharedMemoryStatus(ctx, &oippb.CudaSharedMemoryStatusRequest{})), codes.Unimplemented, "no CUDA shared memory extension"},
		{second(g.CudaSharedMemoryRegister(ctx, &oippb.CudaSharedMemoryRegisterRequest{})), codes.Unimplemented, "no CUDA shared memory extension"},
		{second(g.CudaSharedMemoryUnregister(ctx, &oippb.CudaSharedMemoryUnregisterRequest{})), codes.Unimplemented, "no CUDA shared memory extension"},
		{second(g.TraceSetting(ctx, &oippb.TraceSettingRequest{})), codes.Unimplemented, "no trace extension"},
		{second(g.LogSettings(ctx, &oippb.LogSettingsRequest{})), codes.Unimplemented, "log_level"},
	} {
		if st := grpcstatus.Convert(c.err); st.Code() != c.code || !strings.Contains(st.Message(), "is not supported: ") || !strings.Contains(st.Message(), c.want) {
			t.Errorf("%v, want %v saying %q", c.err, c.code, c.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestUnservedRESTEndpointsGiveTheGRPCReasons(t *testing.T) {
	for _, c := range []struct{ method, path, why string }{
		{"GET", "/v2/systemsharedmemory/status", whyNoSharedMemory},
		{"POST", "/v2/systemsharedmemory/region/r0/register", whyNoSharedMemory},
		{"POST", "/v2/cudasharedmemory/region/r0/unregister", whyNoCudaSharedMemory},
		{"GET", "/v2/trace/setting", whyNoTrace},
		{"GET", "/v2/models/pctr/trace/setting", whyNoTrace},
		{"POST", "/v2/models/pctr/trace/setting", whyNoTrace},
		{"POST", "/v2/logging", whyNoLogSettings},
	} {
		code, body := restGet(t, &triton{}, c.method, c.path, "{}")
		want, _ := json.Marshal(map[string]string{"error": c.method + " " + c.path + " is not supported: " + c.why})
		if code != 501 || body != string(want) {
			t.Errorf("%s %s: %d %s, want 501 %s", c.method, c.path, code, body, want)
		}
	}
}

// streamClient serves b's gRPC service in process and returns a client.
func streamClient(t *testing.T, b Backend) oippb.GRPCInferenceServiceClient {
	t.Helper()
	ln := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	oippb.RegisterGRPCInferenceServiceServer(gs, &grpcService{b: b, version: "1.0"})
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		return ln.DialContext(ctx)
	}), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return oippb.NewGRPCInferenceServiceClient(conn)
}

func TestModelStreamInferAnswersInOrderAndSurvivesBadRequests(t *testing.T) {
	// "a" runs until "e" has reached the backend: the stream runs its
	// requests concurrently, yet answers in the order they came.
	release := make(chan struct{})
	b := &triton{wait: map[string]chan struct{}{"a": release},
		errs: map[string]error{"d": fmt.Errorf("%w: input 'x' has 3 columns, the model takes 4", servables.ErrInvalidInput)}}
	stream, err := streamClient(t, &releasing{b, "e", release}).ModelStreamInfer(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	class := &oippb.InferParameter{ParameterChoice: &oippb.InferParameter_Int64Param{Int64Param: 1}}
	reqs := []*oippb.ModelInferRequest{
		{Id: "a", ModelName: "pctr", Inputs: fp32Input()},
		{Id: "b", ModelName: "nope", ModelVersion: "3", Inputs: fp32Input()},
		{Id: "c", ModelName: "pctr", Inputs: fp32Input(), Outputs: []*oippb.ModelInferRequest_InferRequestedOutputTensor{{Name: "y", Parameters: map[string]*oippb.InferParameter{"classification": class}}}},
		{Id: "d", ModelName: "pctr", ModelVersion: "1", Inputs: fp32Input()},
		{Id: "e", ModelName: "pctr", ModelVersion: "1", Inputs: fp32Input()},
	}
	for _, r := range reqs {
		if err := stream.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	want := []struct{ id, version, errPart string }{
		{"a", "2", ""},
		{"b", "3", "Request for unknown model: 'nope' version 3 is not found"},
		{"c", "", `requested output "y": parameter classification is not supported (Grove has no classification extension)`},
		{"d", "1", "input 'x' has 3 columns, the model takes 4"},
		{"e", "1", ""},
	}
	for _, w := range want {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("answer to %s: %v", w.id, err)
		}
		ir := resp.GetInferResponse()
		if ir.GetId() != w.id || ir.GetModelVersion() != w.version || !strings.Contains(resp.GetErrorMessage(), w.errPart) || (w.errPart == "") != (resp.GetErrorMessage() == "") {
			t.Errorf("answer %v, want id %s version %s error %q", resp, w.id, w.version, w.errPart)
		}
		if !ir.GetParameters()[ParamFinalResponse].GetBoolParam() {
			t.Errorf("answer to %s: parameters %v, want %s true (Triton's clients wait for it)", w.id, ir.GetParameters(), ParamFinalResponse)
		}
		if w.errPart == "" && (len(ir.GetOutputs()) != 1 || ir.GetOutputs()[0].GetName() != "y" || len(ir.GetRawOutputContents()[0]) != 16) {
			t.Errorf("answer to %s: outputs %v", w.id, ir)
		}
	}
	if resp, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last answer: %v %v, want the stream's end", resp, err)
	}
}

// releasing closes release when the request with id last reaches the
// backend, before running it.
type releasing struct {
	*triton
	last    string
	release chan struct{}
}

func (r *releasing) Infer(ctx context.Context, reqs []actors.Request) ([]actors.Result, error) {
	if reqs[0].RequestID == r.last {
		close(r.release)
	}
	return r.triton.Infer(ctx, reqs)
}

func TestTheTimeoutParameterMayBeAUint64ParamAsTritonsProtoAllows(t *testing.T) {
	f := &fake{}
	g := &grpcService{b: f}
	call := func(p *oippb.InferParameter) error {
		_, err := g.ModelInfer(t.Context(), &oippb.ModelInferRequest{ModelName: "m", Parameters: map[string]*oippb.InferParameter{"timeout": p},
			Inputs: fp32Input()})
		return err
	}
	if err := call(&oippb.InferParameter{ParameterChoice: &oippb.InferParameter_Uint64Param{Uint64Param: 20000}}); err != nil || f.left <= 10*time.Millisecond || f.left > 20*time.Millisecond {
		t.Fatalf("uint64_param timeout 20000 us: %v, deadline %v away", err, f.left)
	}
	err := call(&oippb.InferParameter{ParameterChoice: &oippb.InferParameter_Uint64Param{Uint64Param: 1 << 63}})
	if st := grpcstatus.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "is not a timeout in microseconds") {
		t.Fatalf("uint64_param above the range: %v", err)
	}
}

func TestRepositoryLoadAndUnloadOverGRPCAreRefusedAsRESTRefusesThem(t *testing.T) {
	g := &grpcService{b: &triton{}}
	for action, err := range map[string]error{
		"load":   second(g.RepositoryModelLoad(t.Context(), &oippb.RepositoryModelLoadRequest{ModelName: "ads/pctr"})),
		"unload": second(g.RepositoryModelUnload(t.Context(), &oippb.RepositoryModelUnloadRequest{ModelName: "ads/pctr"})),
	} {
		want := errorText(RepositoryControlRefusal(action, "ads/pctr"))
		if st := grpcstatus.Convert(err); st.Code() != codes.FailedPrecondition || st.Message() != want {
			t.Errorf("%s: %v, want FAILED_PRECONDITION %q", action, err, want)
		}
	}
}

// Triton's statistics extension lists every member of $model_stat and
// $inference_stats (none is #optional but version); perf_analyzer reads
// inference_stats.cache_hit and cache_miss of the REST answer without
// checking they are there.
func TestRESTStatisticsHaveEveryMemberOfTritonsSchema(t *testing.T) {
	code, body := restGet(t, &triton{}, "GET", "/v2/models/pctr/versions/2/stats", "")
	if code != 200 {
		t.Fatalf("HTTP %d %s", code, body)
	}
	var doc struct {
		ModelStats []map[string]json.RawMessage `json:"model_stats"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil || len(doc.ModelStats) != 1 {
		t.Fatalf("%v: %s", err, body)
	}
	st := doc.ModelStats[0]
	for _, k := range []string{"name", "version", "last_inference", "inference_count", "execution_count",
		"inference_stats", "response_stats", "batch_stats", "memory_usage"} {
		if _, ok := st[k]; !ok {
			t.Errorf("model_stat has no %q: %s", k, body)
		}
	}
	if string(st["last_inference"]) != "1700000000123" || string(st["inference_count"]) != "12" {
		t.Errorf("counts are not JSON numbers: %s", body)
	}
	var is map[string]struct {
		Count *json.Number `json:"count"`
		Ns    *json.Number `json:"ns"`
	}
	if err := json.Unmarshal(st["inference_stats"], &is); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"success", "fail", "queue", "compute_input", "compute_infer", "compute_output", "cache_hit", "cache_miss"} {
		if d, ok := is[k]; !ok || d.Count == nil || d.Ns == nil {
			t.Errorf("inference_stats.%s has no count and ns: %s", k, st["inference_stats"])
		}
	}
	if is["success"].Ns == nil || *is["success"].Ns != "6000" {
		t.Errorf("inference_stats.success: %s", st["inference_stats"])
	}
}

// tritonclient.grpc sends compressed messages when asked
// (compression_algorithm "gzip" or "deflate"); Triton decodes both.
func TestModelInferTakesGzipAndDeflateCompressedMessages(t *testing.T) {
	c := streamClient(t, &triton{})
	for _, name := range []string{"gzip", "deflate"} {
		resp, err := c.ModelInfer(t.Context(), &oippb.ModelInferRequest{Id: name, ModelName: "pctr", Inputs: fp32Input()}, grpc.UseCompressor(name))
		if err != nil || resp.GetId() != name || len(resp.GetRawOutputContents()) != 1 {
			t.Errorf("grpc-encoding %s: %v %v", name, resp, err)
		}
	}
}

// hanging runs every request until its context ends, counting those
// running.
type hanging struct {
	*triton
	running atomic.Int32
	entered chan struct{}
}

func (h *hanging) Infer(ctx context.Context, _ []actors.Request) ([]actors.Result, error) {
	h.running.Add(1)
	defer h.running.Add(-1)
	h.entered <- struct{}{}
	<-ctx.Done()
	return nil, ctx.Err()
}

// A client that goes away mid-stream cancels the requests it left
// running: none keeps a model, or a goroutine, busy.
func TestModelStreamInferCancelsItsRequestsWhenTheClientGoesAway(t *testing.T) {
	h := &hanging{triton: &triton{}, entered: make(chan struct{}, 3)}
	ctx, cancel := context.WithCancel(t.Context())
	stream, err := streamClient(t, h).ModelStreamInfer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c"} {
		if err := stream.Send(&oippb.ModelInferRequest{Id: id, ModelName: "pctr", Inputs: fp32Input()}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		select {
		case <-h.entered:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d requests reached the backend, want 3", h.running.Load())
		}
	}
	cancel()
	deadline := time.Now().Add(5 * time.Second)
	for h.running.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests still running 5s after the client went away", h.running.Load())
		}
		time.Sleep(time.Millisecond)
	}
}

// A stream runs at most maxStreamInFlight requests at once; past that it
// stops reading, so a client that sends faster than the model answers (or
// than it reads the answers) holds no more than that in the server.
func TestModelStreamInferRunsAtMostMaxStreamInFlightRequests(t *testing.T) {
	h := &hanging{triton: &triton{}, entered: make(chan struct{}, 2*maxStreamInFlight)}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stream, err := streamClient(t, h).ModelStreamInfer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for i := range 2 * maxStreamInFlight {
			if stream.Send(&oippb.ModelInferRequest{Id: fmt.Sprint(i), ModelName: "pctr", Inputs: fp32Input()}) != nil {
				return
			}
		}
	}()
	for range maxStreamInFlight {
		select {
		case <-h.entered:
		case <-time.After(5 * time.Second):
			t.Fatalf("%d requests running, want %d", h.running.Load(), maxStreamInFlight)
		}
	}
	select {
	case <-h.entered:
		t.Errorf("request %d ran while %d were running", maxStreamInFlight+1, maxStreamInFlight)
	case <-time.After(100 * time.Millisecond):
	}
}
