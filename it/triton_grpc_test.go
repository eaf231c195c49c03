package it

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/api/oip/oippb"
)

// tritonBucket holds pctr_onnx/ (ONNX, 2 replicas, batches of up to 8
// rows waiting up to 500 µs) and pcvr/2/, pcvr/3/ (TorchScript, not
// batched).
func tritonBucket(t *testing.T) *dirBucket {
	b := newDirBucket(t)
	onnxModel, err := os.ReadFile(filepath.Join(repoRoot(), "examples", "bucket", "pctr_onnx", "model.onnx"))
	if err != nil {
		t.Fatal(err)
	}
	b.Put(t, "pctr_onnx/model.onnx", onnxModel)
	b.Put(t, "pcvr/2/model.pt", exampleModel(t, "pcvr"))
	b.Put(t, "pcvr/3/model.pt", exampleModel(t, "pcvr"))
	putConfig(t, b, modelEntry{Path: "pctr_onnx/", Replicas: 2, MaxRows: 8, DelayUs: 500},
		modelEntry{Path: "pcvr/2/", MaxRows: 1}, modelEntry{Path: "pcvr/3/", MaxRows: 1})
	return b
}

// pctrRequest asks pctr_onnx for expected.json's pctr_v1 input (the same
// weights), with raw contents.
func pctrRequest(exp map[string]expectedModel, id string) *oippb.ModelInferRequest {
	x := exp["pctr_v1"].Inputs[0]
	return &oippb.ModelInferRequest{ModelName: "pctr_onnx", Id: id,
		Inputs:           []*oippb.ModelInferRequest_InferInputTensor{{Name: "x", Datatype: "FP32", Shape: x.Shape}},
		RawInputContents: [][]byte{rawLE("FP32", x.Data)}}
}

// TestTritonGRPCServesTheWholeService drives every method of Triton's
// inference.GRPCInferenceService with the client generated from the proto
// Grove serves (api/oip/oippb) against the real binary: health and metadata
// (Triton platform names, the served extensions), ModelConfig (batched
// and not, equal to REST's /config), ModelInfer, ModelStatistics (equal
// to REST's /stats), RepositoryIndex (equal to REST's index),
// ModelStreamInfer with failures mid-stream, the refused class_count and
// shared-memory parameters, and the methods Grove does not serve.
//
// Budget: 10 s.
func TestTritonGRPCServesTheWholeService(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	g := startGrove(t, tritonBucket(t).URL(), nil)
	c := oippb.NewGRPCInferenceServiceClient(g.dial())
	ctx := withTimeout(t, 2*time.Minute)

	// Health and metadata.
	if r, err := c.ServerLive(ctx, &oippb.ServerLiveRequest{}); err != nil || !r.GetLive() {
		t.Fatalf("ServerLive: %v %v", r, err)
	}
	if r, err := c.ServerReady(ctx, &oippb.ServerReadyRequest{}); err != nil || !r.GetReady() {
		t.Fatalf("ServerReady: %v %v", r, err)
	}
	sm, err := c.ServerMetadata(ctx, &oippb.ServerMetadataRequest{})
	_, restMeta := g.get("/v2")
	if err != nil || strings.Join(sm.GetExtensions(), ",") != "binary_tensor_data,model_configuration,statistics" ||
		!strings.Contains(string(restMeta), `"extensions":["binary_tensor_data","model_configuration","statistics"]`) {
		t.Errorf("ServerMetadata: %v %v; REST %s", sm, err, restMeta)
	}
	if r, err := c.ModelReady(ctx, &oippb.ModelReadyRequest{Name: "pcvr", Version: "2"}); err != nil || !r.GetReady() {
		t.Errorf("ModelReady(pcvr 2): %v %v", r, err)
	}
	for name, platform := range map[string]string{"pctr_onnx": "onnxruntime_onnx", "pcvr": "pytorch_libtorch"} {
		if md, err := c.ModelMetadata(ctx, &oippb.ModelMetadataRequest{Name: name}); err != nil || md.GetPlatform() != platform {
			t.Errorf("ModelMetadata(%s): %v %v, want platform %s", name, md, err, platform)
		}
	}

	// ModelConfig: pctr_onnx is batched, so its dims leave the batch out.
	cfg, err := c.ModelConfig(ctx, &oippb.ModelConfigRequest{Name: "pctr_onnx"})
	if err != nil {
		t.Fatal(err)
	}
	pc := cfg.GetConfig()
	in, out := pc.GetInput(), pc.GetOutput()
	if pc.GetName() != "pctr_onnx" || pc.GetPlatform() != "onnxruntime_onnx" || pc.GetBackend() != "onnxruntime" || pc.GetMaxBatchSize() != 8 ||
		len(in) != 1 || in[0].GetName() != "x" || in[0].GetDataType() != oippb.DataType_TYPE_FP32 || !equalDims(in[0].GetDims(), 64) ||
		len(out) != 1 || out[0].GetName() != "output_0" || out[0].GetDataType() != oippb.DataType_TYPE_FP32 || !equalDims(out[0].GetDims(), 1) ||
		pc.GetDynamicBatching().GetMaxQueueDelayMicroseconds() != 500 ||
		len(pc.GetInstanceGroup()) != 1 || pc.GetInstanceGroup()[0].GetKind() != oippb.ModelInstanceGroup_KIND_CPU || pc.GetInstanceGroup()[0].GetCount() != 2 ||
		pc.GetVersionPolicy().GetAll() == nil {
		t.Errorf("ModelConfig(pctr_onnx) = %v", pc)
	}
	code, restCfg := g.get("/v2/models/pctr_onnx/config")
	var fromREST oippb.ModelConfig
	if err := protojson.Unmarshal(restCfg, &fromREST); code != 200 || err != nil || !proto.Equal(&fromREST, pc) {
		t.Errorf("REST config: HTTP %d %s (%v), want gRPC's %v", code, restCfg, err, pc)
	}
	for _, want := range []string{`"max_batch_size":8`, `"data_type":"TYPE_FP32","dims":[64]`, `"max_queue_delay_microseconds":500`, `"kind":"KIND_CPU"`} {
		if !strings.Contains(string(restCfg), want) {
			t.Errorf("REST config lacks %s: %s", want, restCfg)
		}
	}
	cfg, err = c.ModelConfig(ctx, &oippb.ModelConfigRequest{Name: "pcvr", Version: "2"})
	if err != nil || cfg.GetConfig().GetPlatform() != "pytorch_libtorch" || cfg.GetConfig().GetBackend() != "pytorch" ||
		cfg.GetConfig().GetMaxBatchSize() != 0 || cfg.GetConfig().GetDynamicBatching() != nil {
		t.Errorf("ModelConfig(pcvr 2) = %v %v, want max_batch_size 0 and no dynamic_batching", cfg, err)
	}
	if _, err := c.ModelConfig(ctx, &oippb.ModelConfigRequest{Name: "nope"}); status.Code(err) != codes.NotFound {
		t.Errorf("ModelConfig(nope): %v", err)
	}

	// ModelInfer, then the statistics count it.
	for range 3 {
		resp, err := c.ModelInfer(ctx, pctrRequest(exp, "i"))
		if err != nil {
			t.Fatal(err)
		}
		checkClose(t, "pctr_onnx", fromRawLE(t, "FP32", resp.GetRawOutputContents()[0]), exp["pctr_v1"].Outputs[0].Data, 1e-5)
	}
	stats, err := c.ModelStatistics(ctx, &oippb.ModelStatisticsRequest{Name: "pctr_onnx"})
	if err != nil || len(stats.GetModelStats()) != 1 {
		t.Fatalf("ModelStatistics: %v %v", stats, err)
	}
	st := stats.GetModelStats()[0]
	if st.GetInferenceStats().GetSuccess().GetCount() != 3 || st.GetInferenceCount() != 6 || st.GetLastInference() == 0 || st.GetVersion() != "1" {
		t.Errorf("statistics after 3 requests of 2 rows: %v", st)
	}
	_, restStats := g.get("/v2/models/pctr_onnx/stats")
	var statsREST oippb.ModelStatisticsResponse
	if err := protojson.Unmarshal(restStats, &statsREST); err != nil || len(statsREST.GetModelStats()) != 1 ||
		!proto.Equal(statsREST.GetModelStats()[0].GetInferenceStats().GetSuccess(), st.GetInferenceStats().GetSuccess()) ||
		!proto.Equal(statsREST.GetModelStats()[0].GetInferenceStats().GetComputeInfer(), st.GetInferenceStats().GetComputeInfer()) ||
		statsREST.GetModelStats()[0].GetInferenceCount() != st.GetInferenceCount() || statsREST.GetModelStats()[0].GetLastInference() != st.GetLastInference() {
		t.Errorf("REST statistics %s (%v) differ from gRPC's %v", restStats, err, st)
	}

	// RepositoryIndex, as REST lists it.
	idx, err := c.RepositoryIndex(ctx, &oippb.RepositoryIndexRequest{})
	code, _, restIdx := oipPost(t, g, "/v2/repository/index", nil, 0)
	var idxREST oippb.RepositoryIndexResponse
	if err != nil || code != 200 || protojson.Unmarshal([]byte(`{"models":`+string(restIdx)+`}`), &idxREST) != nil ||
		!proto.Equal(idx, &idxREST) || len(idx.GetModels()) != 3 || idx.GetModels()[0].GetState() != "READY" {
		t.Errorf("RepositoryIndex %v %v; REST %s", idx, err, restIdx)
	}

	// ModelStreamInfer: failures are answered in the stream, which goes on.
	stream, err := c.ModelStreamInfer(ctx)
	if err != nil {
		t.Fatal(err)
	}
	class := &oippb.InferParameter{ParameterChoice: &oippb.InferParameter_Int64Param{Int64Param: 1}}
	classReq := pctrRequest(exp, "s3")
	classReq.Outputs = []*oippb.ModelInferRequest_InferRequestedOutputTensor{{Name: "output_0", Parameters: map[string]*oippb.InferParameter{"classification": class}}}
	badShape := pctrRequest(exp, "s4")
	badShape.Inputs[0].Shape = []int64{4, 32}
	unknown := pctrRequest(exp, "s2")
	unknown.ModelName = "nope"
	for _, r := range []*oippb.ModelInferRequest{pctrRequest(exp, "s1"), unknown, classReq, badShape, pctrRequest(exp, "s5")} {
		if err := stream.Send(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ id, err string }{
		{"s1", ""},
		{"s2", "Request for unknown model: 'nope' is not found"},
		{"s3", `requested output "output_0": parameter classification is not supported (Grove has no classification extension)`},
		{"s4", `"x" has shape [4 32], the model takes`},
		{"s5", ""},
	} {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("answer to %s: %v", want.id, err)
		}
		if resp.GetInferResponse().GetId() != want.id || (want.err == "") != (resp.GetErrorMessage() == "") || !strings.Contains(resp.GetErrorMessage(), want.err) {
			t.Errorf("answer %v, want id %s and error %q", resp, want.id, want.err)
			continue
		}
		if !resp.GetInferResponse().GetParameters()["triton_final_response"].GetBoolParam() {
			t.Errorf("answer to %s has no triton_final_response true: %v", want.id, resp.GetInferResponse().GetParameters())
		}
		if want.err == "" {
			checkClose(t, "stream "+want.id, fromRawLE(t, "FP32", resp.GetInferResponse().GetRawOutputContents()[0]), exp["pctr_v1"].Outputs[0].Data, 1e-5)
		}
	}
	if r, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("after the last answer: %v %v, want the end of the stream", r, err)
	}

	// class_count and shared memory are refused on ModelInfer as over REST.
	region := &oippb.InferParameter{ParameterChoice: &oippb.InferParameter_StringParam{StringParam: "region0"}}
	shmIn := pctrRequest(exp, "m1")
	shmIn.RawInputContents = nil
	shmIn.Inputs[0].Parameters = map[string]*oippb.InferParameter{"shared_memory_region": region}
	shmOut := pctrRequest(exp, "m2")
	shmOut.Outputs = []*oippb.ModelInferRequest_InferRequestedOutputTensor{{Name: "output_0", Parameters: map[string]*oippb.InferParameter{"shared_memory_region": region}}}
	for _, bad := range []struct {
		req  *oippb.ModelInferRequest
		rest string
	}{
		{classReq, `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,64],"data":` + zeros(64) + `}],"outputs":[{"name":"output_0","parameters":{"classification":1}}]}`},
		{shmIn, `{"inputs":[{"name":"x","datatype":"FP32","shape":[2,64],"parameters":{"shared_memory_region":"region0"}}]}`},
		{shmOut, `{"inputs":[{"name":"x","datatype":"FP32","shape":[1,64],"data":` + zeros(64) + `}],"outputs":[{"name":"output_0","parameters":{"shared_memory_region":"region0"}}]}`},
	} {
		_, err := c.ModelInfer(ctx, bad.req)
		code, _, body := oipPost(t, g, "/v2/models/pctr_onnx/infer", []byte(bad.rest), 0)
		var restErr struct{ Error string }
		_ = json.Unmarshal(body, &restErr)
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || code != 400 || st.Message() != restErr.Error || !strings.Contains(st.Message(), "is not supported") {
			t.Errorf("ModelInfer %v: %v; REST %d %s", bad.req.GetId(), err, code, body)
		}
	}

	// The methods Grove does not serve say why.
	for _, u := range []struct {
		err  error
		code codes.Code
	}{
		{errOf(c.SystemSharedMemoryRegister(ctx, &oippb.SystemSharedMemoryRegisterRequest{Name: "r", Key: "/k", ByteSize: 64})), codes.Unimplemented},
		{errOf(c.SystemSharedMemoryStatus(ctx, &oippb.SystemSharedMemoryStatusRequest{})), codes.Unimplemented},
		{errOf(c.SystemSharedMemoryUnregister(ctx, &oippb.SystemSharedMemoryUnregisterRequest{})), codes.Unimplemented},
		{errOf(c.CudaSharedMemoryRegister(ctx, &oippb.CudaSharedMemoryRegisterRequest{})), codes.Unimplemented},
		{errOf(c.CudaSharedMemoryStatus(ctx, &oippb.CudaSharedMemoryStatusRequest{})), codes.Unimplemented},
		{errOf(c.CudaSharedMemoryUnregister(ctx, &oippb.CudaSharedMemoryUnregisterRequest{})), codes.Unimplemented},
		{errOf(c.TraceSetting(ctx, &oippb.TraceSettingRequest{})), codes.Unimplemented},
		{errOf(c.LogSettings(ctx, &oippb.LogSettingsRequest{})), codes.Unimplemented},
	} {
		if st := status.Convert(u.err); st.Code() != u.code || !strings.Contains(st.Message(), "is not supported: ") {
			t.Errorf("%v, want %v saying why", u.err, u.code)
		}
	}
	// Load and unload answer what REST's load and unload answer.
	for action, err := range map[string]error{
		"load":   errOf(c.RepositoryModelLoad(ctx, &oippb.RepositoryModelLoadRequest{ModelName: "pcvr"})),
		"unload": errOf(c.RepositoryModelUnload(ctx, &oippb.RepositoryModelUnloadRequest{ModelName: "pcvr"})),
	} {
		code, body := g.send(t, "POST", "/v2/repository/models/pcvr/"+action, nil)
		var rest struct{ Error string }
		_ = json.Unmarshal([]byte(body), &rest)
		st := status.Convert(err)
		if st.Code() != codes.FailedPrecondition || code != 409 || rest.Error != st.Message() || !strings.Contains(st.Message(), "model repository "+action+" of model 'pcvr' is refused") {
			t.Errorf("%s: gRPC %v, REST %d %s: want FAILED_PRECONDITION and 409 with one text", action, err, code, body)
		}
	}
	// Their REST endpoints give the same reasons.
	shm := status.Convert(errOf(c.SystemSharedMemoryStatus(ctx, &oippb.SystemSharedMemoryStatusRequest{}))).Message()
	code, _, body := oipPost(t, g, "/v2/systemsharedmemory/region/r/register", []byte(`{"key": "/k", "offset": 0, "byte_size": 64}`), 0)
	if _, why, _ := strings.Cut(shm, "is not supported: "); code != 501 || !strings.Contains(string(body), why) {
		t.Errorf("REST shared memory register: %d %s, want 501 saying %q", code, body, why)
	}
}

// errOf is the error of a call.
func errOf[T any](_ T, err error) error { return err }

// equalDims reports whether dims are want.
func equalDims(dims []int64, want ...int64) bool {
	if len(dims) != len(want) {
		return false
	}
	for i := range dims {
		if dims[i] != want[i] {
			return false
		}
	}
	return true
}

// zeros is a JSON array of n zeros.
func zeros(n int) string {
	return "[" + strings.TrimSuffix(strings.Repeat("0,", n), ",") + "]"
}

// TestGrpcurlCallsTritonsMethodsFromTheProtoFiles calls the Triton methods
// with grpcurl reading Grove's .proto files (not reflection), as a user of
// the repository would: ModelConfig, ModelStatistics, RepositoryIndex and
// a ModelStreamInfer of two requests.
//
// Budget: 10 s.
func TestGrpcurlCallsTritonsMethodsFromTheProtoFiles(t *testing.T) {
	t.Parallel()
	g := startGrove(t, tritonBucket(t).URL(), nil)
	ctx := withTimeout(t, time.Minute)
	call := func(method, data string) string {
		t.Helper()
		out, err := exec.CommandContext(ctx, grpcurl(t), "-plaintext", "-import-path", filepath.Join(repoRoot(), "api", "oip", "proto"),
			"-proto", "inference/grpc_service.proto", "-d", data, g.grpc, "inference.GRPCInferenceService/"+method).CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl %s: %v\n%s", method, err, out)
		}
		return string(out)
	}
	if out := call("ModelConfig", `{"name": "pctr_onnx"}`); !strings.Contains(out, `"platform": "onnxruntime_onnx"`) ||
		!strings.Contains(out, `"maxBatchSize": 8`) || !strings.Contains(out, `"dataType": "TYPE_FP32"`) {
		t.Errorf("ModelConfig:\n%s", out)
	}
	if out := call("RepositoryIndex", `{}`); !strings.Contains(out, `"name": "pctr_onnx"`) || !strings.Contains(out, `"state": "READY"`) {
		t.Errorf("RepositoryIndex:\n%s", out)
	}
	req := `{"model_name": "pctr_onnx", "id": "%s", "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 64], "contents": {"fp32_contents": ` + zeros(64) + `}}]}`
	out := call("ModelStreamInfer", strings.ReplaceAll(req, "%s", "g1")+strings.ReplaceAll(strings.ReplaceAll(req, "%s", "g2"), "pctr_onnx", "nope"))
	if !strings.Contains(out, `"id": "g1"`) || !strings.Contains(out, `"errorMessage": "Request for unknown model: 'nope' is not found"`) || !strings.Contains(out, `"id": "g2"`) {
		t.Errorf("ModelStreamInfer:\n%s", out)
	}
	if out := call("ModelStatistics", `{"name": "pctr_onnx"}`); !strings.Contains(out, `"inferenceCount": "1"`) {
		t.Errorf("ModelStatistics after one streamed request:\n%s", out)
	}
}
