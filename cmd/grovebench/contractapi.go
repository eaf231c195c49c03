package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	fb "github.com/google/flatbuffers/go"
	gpfb "github.com/oracle/graphpipe-go/graphpipefb"
)

// Request bodies and answers of Grove's contract APIs, for the shadow
// scenario: ForestFlow's BASIC score API (JSON) and GraphPipe (flatbuffers).

// forestflowBody renders a ForestFlow InferenceRequest: one Float32 schema
// entry with a field per column (f0, f1, ...) and a datum per row, numbers
// as JSON numbers.
func forestflowBody(rows [][]float64) []byte {
	var b bytes.Buffer
	width := 0
	if len(rows) > 0 {
		width = len(rows[0])
	}
	b.WriteString(`{"schema":[{"type":"Float32","fields":[`)
	for i := range width {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"f` + strconv.Itoa(i) + `"`)
	}
	b.WriteString(`]}],"datum":[`)
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"tensors":[{"Float32":{"data":[`)
		for j, v := range r {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(fmtNum(v))
		}
		b.WriteString(`]}}]}`)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// forestflowOutputs extracts, from a ForestFlow {"Prediction": ...} answer,
// the first value of the first output of every datum (row), and the release
// that answered.
func forestflowOutputs(body []byte) (out []float64, release string, err error) {
	var r struct {
		Prediction *struct {
			FQRV struct {
				ReleaseVersion string `json:"releaseVersion"`
			} `json:"fqrv"`
			Datum []struct {
				Tensors []map[string]struct {
					Data []float64 `json:"data"`
				} `json:"tensors"`
			} `json:"datum"`
		} `json:"Prediction"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, "", err
	}
	if r.Prediction == nil {
		return nil, "", fmt.Errorf("no Prediction in the answer")
	}
	for i, d := range r.Prediction.Datum {
		if len(d.Tensors) == 0 {
			return nil, "", fmt.Errorf("datum %d has no tensors", i)
		}
		found := false
		for _, t := range d.Tensors[0] {
			if len(t.Data) > 0 {
				out, found = append(out, t.Data[0]), true
			}
		}
		if !found {
			return nil, "", fmt.Errorf("datum %d: no value in its first tensor", i)
		}
	}
	return out, r.Prediction.FQRV.ReleaseVersion, nil
}

// graphpipeBody renders a GraphPipe InferRequest with one FLOAT32 input
// tensor of shape [len(rows), width] (little-endian, as GraphPipe's wire
// format is) and no input or output names.
func graphpipeBody(rows [][]float64) []byte {
	width := 0
	if len(rows) > 0 {
		width = len(rows[0])
	}
	data := make([]byte, 0, 4*len(rows)*width)
	for _, r := range rows {
		for _, v := range r {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32(v)))
		}
	}
	b := fb.NewBuilder(len(data) + 256)
	dataOff := b.CreateByteVector(data)
	gpfb.TensorStartShapeVector(b, 2)
	b.PrependInt64(int64(width))
	b.PrependInt64(int64(len(rows)))
	shapeOff := b.EndVector(2)
	gpfb.TensorStart(b)
	gpfb.TensorAddType(b, gpfb.TypeFloat32)
	gpfb.TensorAddShape(b, shapeOff)
	gpfb.TensorAddData(b, dataOff)
	tensor := gpfb.TensorEnd(b)
	gpfb.InferRequestStartInputTensorsVector(b, 1)
	b.PrependUOffsetT(tensor)
	inputs := b.EndVector(1)
	gpfb.InferRequestStart(b)
	gpfb.InferRequestAddInputTensors(b, inputs)
	infer := gpfb.InferRequestEnd(b)
	gpfb.RequestStart(b)
	gpfb.RequestAddReqType(b, gpfb.ReqInferRequest)
	gpfb.RequestAddReq(b, infer)
	b.Finish(gpfb.RequestEnd(b))
	return b.FinishedBytes()
}

// graphpipeOutputs extracts the values of the first output tensor (FLOAT32)
// of a GraphPipe InferResponse.
func graphpipeOutputs(body []byte) (out []float64, err error) {
	defer func() {
		if r := recover(); r != nil { // a flatbuffer accessor on a bad body
			out, err = nil, fmt.Errorf("not a GraphPipe InferResponse: %v", r)
		}
	}()
	if len(body) < 8 {
		return nil, fmt.Errorf("%d bytes is too short for a GraphPipe InferResponse", len(body))
	}
	resp := gpfb.GetRootAsInferResponse(body, 0)
	if resp.ErrorsLength() > 0 {
		var e gpfb.Error
		resp.Errors(&e, 0)
		return nil, fmt.Errorf("GraphPipe error %d: %s", e.Code(), e.Message())
	}
	var t gpfb.Tensor
	if resp.OutputTensorsLength() == 0 || !resp.OutputTensors(&t, 0) {
		return nil, fmt.Errorf("no output tensor in the GraphPipe answer")
	}
	if t.Type() != gpfb.TypeFloat32 {
		return nil, fmt.Errorf("output type %s, want Float32", gpfb.EnumNamesType[int(t.Type())])
	}
	data := t.DataBytes()
	if len(data)%4 != 0 {
		return nil, fmt.Errorf("%d data bytes for Float32 values", len(data))
	}
	for i := 0; i < len(data); i += 4 {
		out = append(out, float64(math.Float32frombits(binary.LittleEndian.Uint32(data[i:]))))
	}
	return out, nil
}
