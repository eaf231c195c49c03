package sidecar

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/sidecar/sidecarpb"
	"github.com/groveml/grove/servables"
)

// fake is a Backend: models named "busy/" are overloaded, "bool/" answer a
// BOOL tensor, others echo their inputs; Infer fails with inferErr when
// set, and registrations with regErr.
type fake struct{ inferErr, regErr error }

func (f fake) Infer(_ context.Context, reqs []actors.Request) ([]actors.Result, error) {
	if f.inferErr != nil {
		return nil, f.inferErr
	}
	out := make([]actors.Result, len(reqs))
	for i, r := range reqs {
		out[i] = actors.Result{ModelPath: r.ModelPath, Outputs: r.Inputs}
		switch r.ModelPath {
		case "busy/":
			out[i] = actors.Result{ModelPath: r.ModelPath, Err: fmt.Errorf("%w: queue full", actors.ErrOverloaded)}
		case "bool/":
			b, _ := servables.NewTensor("y", servables.Bool, []int64{1})
			out[i].Outputs = []servables.Tensor{b}
		}
	}
	return out, nil
}
func (f fake) RegisterModel(context.Context, string, map[string][]byte, string) error {
	return f.regErr
}
func (f fake) DeleteModel(context.Context, string) error { return f.regErr }
func (fake) ModelPaths() []string                        { return []string{"a/"} }

func TestPredictAnswersEveryItemInJSONAndInProtos(t *testing.T) {
	s := &service{b: fake{}}
	resp, err := s.Predict(t.Context(), &sidecarpb.PredictRequest{InputData: &sidecarpb.PredictRequest_Input{Input: []byte(
		`{"request":[{"model_path":"a/","tensors":[{"data_type":"INT64","tensor_shape":[1],"tensor_content":["7"]}]},` +
			`{"model_path":"busy/","tensors":[{"data_type":"INT64","tensor_shape":[1],"tensor_content":["7"]}]}]}`)}})
	want := `{"response":[{"model_path":"a/","tensors":[{"tensor_shape":[1],"data_type":"INT64","tensor_content":[7]}]},` +
		`{"model_path":"busy/","error":{"error_type":"MODEL_EXECUTION","description":"overloaded: queue full"}}]}`
	if err != nil || string(resp.GetOutput()) != want {
		t.Errorf("JSON: %v %s\nwant %s", err, resp.GetOutput(), want)
	}

	in := func(path string, c *sidecarpb.TensorContent, dt sidecarpb.DataTypeProto) *sidecarpb.InferenceRequestProto {
		return &sidecarpb.InferenceRequestProto{ModelPath: path, Tensors: []*sidecarpb.TensorProto{{DataType: dt, TensorShape: []int64{1}, TensorContent: c}}}
	}
	i64 := &sidecarpb.TensorContent{TensorContentInt64: []int64{7}}
	resp, err = s.Predict(t.Context(), &sidecarpb.PredictRequest{InputData: &sidecarpb.PredictRequest_ProtoInput{ProtoInput: &sidecarpb.BatchInferenceRequest{
		Request: []*sidecarpb.InferenceRequestProto{in("a/", i64, sidecarpb.DataTypeProto_INT64), in("busy/", i64, sidecarpb.DataTypeProto_INT64),
			in("bad/", &sidecarpb.TensorContent{}, sidecarpb.DataTypeProto_INT64), in("bool/", i64, sidecarpb.DataTypeProto_INT64)}}}})
	if err != nil {
		t.Fatal(err)
	}
	got := resp.GetProtoOutput().GetResponse()
	if len(got) != 4 || got[0].GetTensors()[0].GetTensorContent().GetTensorContentInt64()[0] != 7 ||
		got[1].GetError().GetErrorType() != sidecarpb.ErrorProto_MODEL_EXECUTION ||
		got[2].GetError().GetErrorType() != sidecarpb.ErrorProto_INPUT_PARSING || got[2].GetError().GetModelPath() != "bad/" ||
		got[3].GetError().GetErrorType() != sidecarpb.ErrorProto_OUTPUT_PARSING || got[3].GetTensors() != nil {
		t.Errorf("proto answer %v", got)
	}
}

func TestPredictFailsOnlyWhenTheBatchCannotRun(t *testing.T) {
	json := &sidecarpb.PredictRequest{InputData: &sidecarpb.PredictRequest_Input{Input: []byte(`{"request":[{"model_path":"a/","tensors":[{"data_type":"INT64","tensor_shape":[1],"tensor_content":["7"]}]}]}`)}}
	protos := &sidecarpb.PredictRequest{InputData: &sidecarpb.PredictRequest_ProtoInput{ProtoInput: &sidecarpb.BatchInferenceRequest{
		Request: []*sidecarpb.InferenceRequestProto{{ModelPath: "a/", Tensors: []*sidecarpb.TensorProto{{DataType: sidecarpb.DataTypeProto_INT64,
			TensorShape: []int64{1}, TensorContent: &sidecarpb.TensorContent{TensorContentInt64: []int64{7}}}}}}}}}
	for _, req := range []*sidecarpb.PredictRequest{json, protos} {
		s := &service{b: fake{inferErr: actors.ErrStopped}}
		if _, err := s.Predict(t.Context(), req); status.Code(err) != codes.Unavailable {
			t.Errorf("stopping: %v, want UNAVAILABLE", err)
		}
		s = &service{b: fake{inferErr: context.DeadlineExceeded}}
		resp, err := s.Predict(t.Context(), req)
		if err != nil || !strings.Contains(string(resp.GetOutput())+resp.GetProtoOutput().String(), "DEADLINE_EXCEEDED: context deadline exceeded") {
			t.Errorf("deadline: %v %v, want an item error", resp, err)
		}
	}
}

func TestCodeMapsEveryKind(t *testing.T) {
	for _, c := range []struct {
		err  error
		want codes.Code
	}{
		{fmt.Errorf("%w: x/", actors.ErrNotRegistered), codes.NotFound},
		{fmt.Errorf("%w: bad warm-up", actors.ErrBadRegistration), codes.InvalidArgument},
		{fmt.Errorf("%w: no runtime", servables.ErrUnsupportedRuntime), codes.InvalidArgument},
		{servables.ErrOutput, codes.Internal},
		{servables.ErrOverloaded, codes.ResourceExhausted},
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{context.Canceled, codes.Canceled},
		{servables.ErrCrashed, codes.Internal},
		{errors.New("loading x/model.pt: not a model"), codes.Internal},
		{actors.ErrStopped, codes.Unavailable},
		{fmt.Errorf("%w: x/", actors.ErrAlreadyRegistered), codes.AlreadyExists},
		{fmt.Errorf("%w: x/", actors.ErrManagedByConfig), codes.FailedPrecondition},
		{servables.ErrReadOnly, codes.FailedPrecondition},
	} {
		if got := code(c.err); got != c.want {
			t.Errorf("%v (%v): %v, want %v", c.err, servables.KindOf(c.err), got, c.want)
		}
	}
}

func TestRegistrationErrorsKeepTheirMessage(t *testing.T) {
	s := &service{b: fake{regErr: fmt.Errorf("%w: m/ is in the model config", actors.ErrManagedByConfig)}}
	_, err := s.RegisterModel(t.Context(), &sidecarpb.RegisterModelRequest{ModelSpec: &sidecarpb.ModelSpec{ModelPath: "m/"}})
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "m/ is in the model config") {
		t.Errorf("RegisterModel: %v", err)
	}
	if _, err := s.DeleteModel(t.Context(), &sidecarpb.DeleteModelRequest{}); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("DeleteModel: %v", err)
	}
	paths, err := s.GetModelPaths(t.Context(), &sidecarpb.GetModelPathsRequest{})
	if err != nil || len(paths.GetModelSpecs()) != 1 || paths.GetModelSpecs()[0].GetModelPath() != "a/" {
		t.Errorf("GetModelPaths: %v %v", paths, err)
	}
}

func TestSidecarRefusesBoolAndUint8Outputs(t *testing.T) {
	for _, dt := range []servables.DType{servables.Bool, servables.Uint8} {
		x, _ := servables.NewTensor("y", dt, []int64{1})
		_, err := tensorsToProto([]servables.Tensor{x})
		if want := "output 0 (y) has type " + dt.String() + ", which is not supported by the B&A API"; err == nil || err.Error() != want {
			t.Errorf("%v: %v, want %q", dt, err, want)
		}
	}
}

// allocated returns how many bytes f allocated.
func allocated(f func()) uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	before := m.TotalAlloc
	f()
	runtime.ReadMemStats(&m)
	return m.TotalAlloc - before
}

func TestSidecarTensorsRefuseHugeShapesBeforeAllocating(t *testing.T) {
	tp := &sidecarpb.TensorProto{TensorName: "x", DataType: sidecarpb.DataTypeProto_DOUBLE, TensorShape: []int64{1 << 31},
		TensorContent: &sidecarpb.TensorContent{TensorContentDouble: []float64{1}}}
	var err error
	if grew := allocated(func() { _, err = tensorsFromProto([]*sidecarpb.TensorProto{tp}) }); grew > 1<<20 {
		t.Errorf("%d bytes allocated for a refused request", grew)
	}
	if err == nil || !strings.Contains(err.Error(), "1 values for shape [2147483648]") {
		t.Errorf("error %v, want the value count and shape named", err)
	}
	tp = &sidecarpb.TensorProto{TensorName: "x", DataType: sidecarpb.DataTypeProto_INT8, TensorShape: []int64{2},
		TensorContent: &sidecarpb.TensorContent{TensorContentInt32: []int32{1, -129}}}
	if _, err := tensorsFromProto([]*sidecarpb.TensorProto{tp}); err == nil || !strings.Contains(err.Error(), "value -129 at 1 is out of range") {
		t.Errorf("INT8 out of range: %v", err)
	}
	tp.TensorContent.TensorContentInt32 = []int32{1, -128}
	ts, err := tensorsFromProto([]*sidecarpb.TensorProto{tp})
	if err != nil || ts[0].Int8s()[1] != -128 {
		t.Errorf("INT8: %v %v", ts, err)
	}
}

// FuzzTensorsFromProto feeds arbitrary TensorProto bytes through the
// sidecar's tensor decoder: it returns a tensor whose data matches its
// shape or an error, never panics and never allocates more than the
// request carries. The seed corpus is in testdata/fuzz/FuzzTensorsFromProto.
func FuzzTensorsFromProto(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		var tp sidecarpb.TensorProto
		if proto.Unmarshal(b, &tp) != nil {
			return
		}
		ts, err := tensorsFromProto([]*sidecarpb.TensorProto{&tp})
		if err != nil {
			return
		}
		if err := ts[0].Validate(); err != nil {
			t.Fatalf("decoded tensor %v: %v", ts[0].Shape, err)
		}
		if len(ts[0].Data) > 8*len(b)+8 {
			t.Fatalf("%d bytes of tensor from %d bytes of request", len(ts[0].Data), len(b))
		}
	})
}

func TestPredictFollowsTheSidecarsOrderOfChecks(t *testing.T) {
	s := &service{b: fake{}} // serves a/ only (ModelPaths)
	json := func(body string) string {
		resp, err := s.Predict(t.Context(), &sidecarpb.PredictRequest{InputData: &sidecarpb.PredictRequest_Input{Input: []byte(body)}})
		if err != nil {
			t.Fatal(err)
		}
		return string(resp.GetOutput())
	}
	if got, want := json(`{"request":[{"model_path":"x/","tensors":[{"data_type":"INT64","tensor_shape":[1],"tensor_content":[7]}]}]}`),
		`{"response":[{"model_path":"x/","error":{"error_type":"INPUT_PARSING","description":"All numbers within the tensor_content must be enclosed in quotes"}}]}`; got != want {
		t.Errorf("unquoted number for an unregistered model: %s\nwant %s", got, want)
	}
	if got, want := json(`{"request":[{"model_path":"x/","tensors":[{"data_type":"INT64","tensor_shape":[1],"tensor_content":["seven"]}]}]}`),
		`{"response":[{"model_path":"x/","error":{"error_type":"MODEL_NOT_FOUND","description":"Requested model 'x/' has not been registered"}}]}`; got != want {
		t.Errorf("conversion error for an unregistered model: %s\nwant %s", got, want)
	}
	s.opts.AcceptUnquotedNumbers = true
	if got, want := json(`{"request":[{"model_path":"a/","tensors":[{"data_type":"INT64","tensor_shape":[1],"tensor_content":[7]}]}]}`),
		`{"response":[{"model_path":"a/","tensors":[{"tensor_shape":[1],"data_type":"INT64","tensor_content":[7]}]}]}`; got != want {
		t.Errorf("unquoted number with ba_accept_unquoted_numbers: %s\nwant %s", got, want)
	}

	// The proto form: a value out of its type's range is found after the
	// model lookup, like a conversion error; a count mismatch before it.
	i8 := func(path string, shape []int64, v ...int32) *sidecarpb.InferenceRequestProto {
		return &sidecarpb.InferenceRequestProto{ModelPath: path, Tensors: []*sidecarpb.TensorProto{{DataType: sidecarpb.DataTypeProto_INT8,
			TensorShape: shape, TensorContent: &sidecarpb.TensorContent{TensorContentInt32: v}}}}
	}
	resp, err := s.Predict(t.Context(), &sidecarpb.PredictRequest{InputData: &sidecarpb.PredictRequest_ProtoInput{ProtoInput: &sidecarpb.BatchInferenceRequest{
		Request: []*sidecarpb.InferenceRequestProto{i8("x/", []int64{1}, 300), i8("a/", []int64{1}, 300), i8("x/", []int64{2}, 1), {ModelPath: "x/"}, {ModelPath: "a/"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range resp.GetProtoOutput().GetResponse() {
		got = append(got, r.GetError().GetErrorType().String())
	}
	if want := []string{"MODEL_NOT_FOUND", "INPUT_PARSING", "INPUT_PARSING", "MODEL_NOT_FOUND", "INPUT_PARSING"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("proto answers %v, want %v", got, want)
	}
}

func TestPredictProtoChecksEveryTensorsStructureBeforeARange(t *testing.T) {
	s := &service{b: fake{}} // serves a/ only (ModelPaths)
	// Tensor 0 has a value out of INT8's range (found after the model
	// lookup), tensor 1 too few values (found before it): the item's answer
	// is tensor 1's INPUT_PARSING, whether or not the model is served, as
	// for the JSON form.
	item := func(path string) *sidecarpb.InferenceRequestProto {
		return &sidecarpb.InferenceRequestProto{ModelPath: path, Tensors: []*sidecarpb.TensorProto{
			{DataType: sidecarpb.DataTypeProto_INT8, TensorShape: []int64{1}, TensorContent: &sidecarpb.TensorContent{TensorContentInt32: []int32{300}}},
			{DataType: sidecarpb.DataTypeProto_INT8, TensorShape: []int64{2}, TensorContent: &sidecarpb.TensorContent{TensorContentInt32: []int32{1}}}}}
	}
	resp, err := s.Predict(t.Context(), &sidecarpb.PredictRequest{InputData: &sidecarpb.PredictRequest_ProtoInput{ProtoInput: &sidecarpb.BatchInferenceRequest{
		Request: []*sidecarpb.InferenceRequestProto{item("x/"), item("a/")}}}})
	if err != nil {
		t.Fatal(err)
	}
	const want = "INPUT_PARSING tensor 1 (): 1 values for shape [2] (2 elements)"
	for i, r := range resp.GetProtoOutput().GetResponse() {
		if got := r.GetError().GetErrorType().String() + " " + r.GetError().GetDescription(); got != want {
			t.Errorf("item %d (%s): %s, want %s", i, r.GetModelPath(), got, want)
		}
	}
	// Alone, the range error is still found after the lookup.
	ts, err := tensorsFromProto(item("a/").Tensors[:1])
	var late *rangeError
	if ts != nil || !errors.As(err, &late) {
		t.Errorf("range error alone: %v %v", ts, err)
	}
}
