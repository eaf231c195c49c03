package graphpipe

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"testing"

	"github.com/Sirupsen/logrus"
	fb "github.com/google/flatbuffers/go"
	gp "github.com/oracle/graphpipe-go"
	gpfb "github.com/oracle/graphpipe-go/graphpipefb"

	"github.com/groveml/grove/servables"
)

// buildInfer serialises an InferRequest the way graphpipe-go's
// MultiRemoteRaw does, from native Go values (tensors built by
// graphpipe-go's BuildTensorSafe) or from ready *gp.NativeTensor values.
func buildInfer(tb testing.TB, config string, inputNames, outputNames []string, ins ...any) []byte {
	tb.Helper()
	b := fb.NewBuilder(1024)
	strs := func(list []string, start func(*fb.Builder, int) fb.UOffsetT) fb.UOffsetT {
		offs := make([]fb.UOffsetT, len(list))
		for i, s := range list {
			offs[i] = b.CreateString(s)
		}
		start(b, len(offs))
		for i := len(offs) - 1; i >= 0; i-- {
			b.PrependUOffsetT(offs[i])
		}
		return b.EndVector(len(offs))
	}
	inNames := strs(inputNames, gpfb.InferRequestStartInputNamesVector)
	outNames := strs(outputNames, gpfb.InferRequestStartOutputNamesVector)
	offs := make([]fb.UOffsetT, len(ins))
	for i, in := range ins {
		if nt, ok := in.(*gp.NativeTensor); ok {
			offs[i] = nt.Build(b)
			continue
		}
		if build, ok := in.(func(*fb.Builder) fb.UOffsetT); ok {
			offs[i] = build(b)
			continue
		}
		offs[i] = nativeTensor(tb, in).Build(b)
	}
	gpfb.InferRequestStartInputTensorsVector(b, len(offs))
	for i := len(offs) - 1; i >= 0; i-- {
		b.PrependUOffsetT(offs[i])
	}
	tensors := b.EndVector(len(offs))
	var cfg fb.UOffsetT
	if config != "" {
		cfg = b.CreateString(config)
	}
	gpfb.InferRequestStart(b)
	if config != "" {
		gpfb.InferRequestAddConfig(b, cfg)
	}
	gpfb.InferRequestAddInputNames(b, inNames)
	gpfb.InferRequestAddOutputNames(b, outNames)
	gpfb.InferRequestAddInputTensors(b, tensors)
	ir := gpfb.InferRequestEnd(b)
	gpfb.RequestStart(b)
	gpfb.RequestAddReqType(b, gpfb.ReqInferRequest)
	gpfb.RequestAddReq(b, ir)
	return gp.Serialize(b, gpfb.RequestEnd(b))
}

// nativeTensor turns a (nested) Go slice into a graphpipe-go NativeTensor,
// as NativeTensor.InitSimple does but without its unsafe data conversion,
// which -race's checkptr rejects (see race_off_test.go).
func nativeTensor(tb testing.TB, v any) *gp.NativeTensor {
	tb.Helper()
	shape, _, _, dt, err := gp.ShapeType(reflect.ValueOf(v))
	if err != nil {
		tb.Fatalf("ShapeType(%T): %v", v, err)
	}
	var flat []reflect.Value
	var walk func(reflect.Value)
	walk = func(x reflect.Value) {
		if x.Kind() == reflect.Slice || x.Kind() == reflect.Array {
			for i := range x.Len() {
				walk(x.Index(i))
			}
			return
		}
		flat = append(flat, x)
	}
	walk(reflect.ValueOf(v))
	nt := &gp.NativeTensor{Type: dt, Shape: shape}
	if dt == gpfb.TypeString {
		for _, x := range flat {
			nt.StringVals = append(nt.StringVals, x.String())
		}
		return nt
	}
	var buf bytes.Buffer
	for _, x := range flat {
		if err := binary.Write(&buf, binary.LittleEndian, x.Interface()); err != nil {
			tb.Fatal(err)
		}
	}
	nt.Data = buf.Bytes()
	return nt
}

// buildMetadataRequest serialises a Request holding a MetadataRequest.
func buildMetadataRequest() []byte {
	b := fb.NewBuilder(64)
	gpfb.MetadataRequestStart(b)
	mr := gpfb.MetadataRequestEnd(b)
	gpfb.RequestStart(b)
	gpfb.RequestAddReqType(b, gpfb.ReqMetadataRequest)
	gpfb.RequestAddReq(b, mr)
	return gp.Serialize(b, gpfb.RequestEnd(b))
}

// double returns t with every element doubled, same dtype and shape.
func double(t servables.Tensor) servables.Tensor {
	out, err := servables.NewTensor(t.Name, t.DType, t.Shape)
	if err != nil {
		panic(err)
	}
	switch t.DType {
	case servables.Float32:
		for i, v := range t.Float32s() {
			out.Float32s()[i] = 2 * v
		}
	case servables.Float64:
		for i, v := range t.Float64s() {
			out.Float64s()[i] = 2 * v
		}
	case servables.Int8:
		for i, v := range t.Int8s() {
			out.Int8s()[i] = 2 * v
		}
	case servables.Int16:
		for i, v := range t.Int16s() {
			out.Int16s()[i] = 2 * v
		}
	case servables.Int32:
		for i, v := range t.Int32s() {
			out.Int32s()[i] = 2 * v
		}
	case servables.Int64:
		for i, v := range t.Int64s() {
			out.Int64s()[i] = 2 * v
		}
	}
	return out
}

// testMetadata is what the test server answers a MetadataRequest with.
var testMetadata = Metadata{
	Name: "doubler", Version: "v7", Server: "grove", Description: "doubles every input",
	Inputs: []IO{
		{Name: "x", Description: "features", Type: servables.Float32, Shape: []int64{-1, 3}},
		{Name: "ids", Type: servables.Int64, Shape: []int64{-1}},
	},
	Outputs: []IO{{Name: "y", Type: servables.Float32, Shape: []int64{-1, 3}}, {Name: "any"}},
}

// doublerHandler is a GraphPipe endpoint built on the codec: an
// InferRequest gets its inputs back doubled, in order (as many as there are
// output names, or all of them when none are named); a MetadataRequest gets
// testMetadata. A request that does not parse gets 400 with the error text,
// as graphpipe-go's own server answers, so graphpipe-go's client reports it.
// With ?inline=1 errors come back instead as an InferResponse error, HTTP 200,
// as ForestFlow answers.
func doublerHandler(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	req, err := ParseRequest(body)
	if err != nil {
		if r.URL.Query().Get("inline") != "" {
			w.Write(AppendErrorResponse(nil, http.StatusBadRequest, err.Error()))
			return
		}
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if req.Kind == KindMetadata {
		w.Write(AppendMetadataResponse(nil, testMetadata))
		return
	}
	n := len(req.Inputs)
	if len(req.OutputNames) > 0 {
		if len(req.OutputNames) > n {
			http.Error(w, fmt.Sprintf("%d outputs asked of %d inputs", len(req.OutputNames), n), http.StatusBadRequest)
			return
		}
		n = len(req.OutputNames)
	}
	outs := make([]servables.Tensor, n)
	for i := range outs {
		outs[i] = double(req.Inputs[i])
	}
	w.Write(AppendInferResponse(nil, outs))
}

// startServer serves doublerHandler on 127.0.0.1 for the test.
func startServer(tb testing.TB) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(doublerHandler))
	tb.Cleanup(srv.Close)
	return srv
}

// TestMain silences graphpipe-go's client, which logs every failed call
// through logrus.
func TestMain(m *testing.M) {
	logrus.SetOutput(io.Discard)
	os.Exit(m.Run())
}
