package logging

import (
	"reflect"
	"strings"
	"testing"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/servables"
)

func mustTensor(t *testing.T, name string, dt servables.DType, shape []int64, fill func(servables.Tensor)) servables.Tensor {
	t.Helper()
	x, err := servables.NewTensor(name, dt, shape)
	if err != nil {
		t.Fatal(err)
	}
	fill(x)
	return x
}

func sampleTensors(t *testing.T) []servables.Tensor {
	return []servables.Tensor{
		mustTensor(t, "f", servables.Float32, []int64{2, 2}, func(x servables.Tensor) { copy(x.Float32s(), []float32{0.5, -1, 3.25, 1e-7}) }),
		mustTensor(t, "d", servables.Float64, []int64{3}, func(x servables.Tensor) { copy(x.Float64s(), []float64{0.1, -2.5e300, 7}) }),
		mustTensor(t, "i8", servables.Int8, []int64{1, 3}, func(x servables.Tensor) { copy(x.Int8s(), []int8{-128, 0, 127}) }),
		mustTensor(t, "i16", servables.Int16, []int64{2}, func(x servables.Tensor) { copy(x.Int16s(), []int16{-32768, 32767}) }),
		mustTensor(t, "i32", servables.Int32, []int64{2}, func(x servables.Tensor) { copy(x.Int32s(), []int32{-1 << 31, 1<<31 - 1}) }),
		mustTensor(t, "", servables.Int64, []int64{1, 1}, func(x servables.Tensor) { copy(x.Int64s(), []int64{-1 << 63}) }),
		mustTensor(t, "scalar", servables.Float32, nil, func(x servables.Tensor) { x.Float32s()[0] = 42 }),
	}
}

func TestTensorsToProtoUsesOneTypedFieldPerDatatype(t *testing.T) {
	ps := TensorsToProto(sampleTensors(t))
	want := []*grovepb.Tensor{
		{Name: "f", Datatype: "FLOAT", Shape: []int64{2, 2}, FloatData: []float32{0.5, -1, 3.25, 1e-7}},
		{Name: "d", Datatype: "DOUBLE", Shape: []int64{3}, DoubleData: []float64{0.1, -2.5e300, 7}},
		{Name: "i8", Datatype: "INT8", Shape: []int64{1, 3}, Int32Data: []int32{-128, 0, 127}},
		{Name: "i16", Datatype: "INT16", Shape: []int64{2}, Int32Data: []int32{-32768, 32767}},
		{Name: "i32", Datatype: "INT32", Shape: []int64{2}, Int32Data: []int32{-1 << 31, 1<<31 - 1}},
		{Datatype: "INT64", Shape: []int64{1, 1}, Int64Data: []int64{-1 << 63}},
		{Name: "scalar", Datatype: "FLOAT", FloatData: []float32{42}},
	}
	if len(ps) != len(want) {
		t.Fatalf("%d tensors, want %d", len(ps), len(want))
	}
	for i := range want {
		g, w := ps[i], want[i]
		if g.Name != w.Name || g.Datatype != w.Datatype || len(g.RawData) != 0 ||
			!reflect.DeepEqual(g.FloatData, w.FloatData) || !reflect.DeepEqual(g.DoubleData, w.DoubleData) ||
			!reflect.DeepEqual(g.Int32Data, w.Int32Data) || !reflect.DeepEqual(g.Int64Data, w.Int64Data) ||
			len(g.Shape) != len(w.Shape) || (len(w.Shape) > 0 && !reflect.DeepEqual(g.Shape, w.Shape)) {
			t.Errorf("tensor %d = %v, want %v", i, g, w)
		}
	}
	if TensorsToProto(nil) != nil {
		t.Error("no tensors should give nil")
	}
}

func TestTensorsRoundTrip(t *testing.T) {
	in := sampleTensors(t)
	back, err := TensorsFromProto(TensorsToProto(in))
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if back[i].Name != in[i].Name || back[i].DType != in[i].DType || !reflect.DeepEqual(back[i].Data, in[i].Data) ||
			len(back[i].Shape) != len(in[i].Shape) || back[i].Validate() != nil {
			t.Errorf("tensor %d: got %+v, want %+v", i, back[i], in[i])
		}
	}
	back[0].Float32s()[0] = 99
	if in[0].Float32s()[0] == 99 {
		t.Error("TensorsFromProto shares memory with its input")
	}
}

func TestTensorsFromProtoReadsRawData(t *testing.T) {
	p := &grovepb.Tensor{Datatype: "INT16", Shape: []int64{2}, RawData: []byte{0x01, 0x02, 0xff, 0xff}}
	got, err := TensorsFromProto([]*grovepb.Tensor{p})
	if err != nil {
		t.Fatal(err)
	}
	if v := got[0].Int16s(); v[0] != 0x0201 || v[1] != -1 {
		t.Errorf("got %v", v)
	}
}

func TestTensorsFromProtoErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    *grovepb.Tensor
		want string
	}{
		{"datatype", &grovepb.Tensor{Name: "x", Datatype: "UINT16", Shape: []int64{1}}, `tensor 0 ("x"): unsupported datatype "UINT16"`},
		{"bool byte", &grovepb.Tensor{Name: "m", Datatype: "BOOL", Shape: []int64{3}, RawData: []byte{1, 0, 2}}, `tensor 0 ("m"): raw_data byte 2 is 2; BOOL data must be bytes 0 (false) or 1 (true)`},
		{"bool no data", &grovepb.Tensor{Datatype: "BOOL", Shape: []int64{2}}, "0 values for shape [2] (2 elements) of BOOL"},
		{"uint8 raw length", &grovepb.Tensor{Datatype: "UINT8", Shape: []int64{2}, RawData: []byte{1}}, "raw_data has 1 bytes, shape [2] of UINT8 needs 2"},
		{"shape", &grovepb.Tensor{Datatype: "FLOAT", Shape: []int64{0}, FloatData: []float32{}}, "dimension 0 is 0"},
		{"too few values", &grovepb.Tensor{Datatype: "FLOAT", Shape: []int64{3}, FloatData: []float32{1, 2}}, "2 values for shape [3] (3 elements) of FLOAT"},
		{"wrong field", &grovepb.Tensor{Datatype: "FLOAT", Shape: []int64{1}, DoubleData: []float64{1}}, "0 values for shape [1]"},
		{"int8 range", &grovepb.Tensor{Datatype: "INT8", Shape: []int64{2}, Int32Data: []int32{1, 200}}, "value 200 at 1 is out of the INT8 range"},
		{"int16 range", &grovepb.Tensor{Datatype: "INT16", Shape: []int64{1}, Int32Data: []int32{-40000}}, "out of the INT16 range"},
		{"raw length", &grovepb.Tensor{Datatype: "INT32", Shape: []int64{2}, RawData: []byte{1, 2, 3}}, "raw_data has 3 bytes, shape [2] of INT32 needs 8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := TensorsFromProto([]*grovepb.Tensor{tc.p})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestBoolAndUint8TravelInRawData(t *testing.T) {
	in := []servables.Tensor{
		mustTensor(t, "mask", servables.Bool, []int64{2, 2}, func(x servables.Tensor) { copy(x.Bools(), []bool{true, false, false, true}) }),
		mustTensor(t, "u8", servables.Uint8, []int64{3}, func(x servables.Tensor) { copy(x.Uint8s(), []uint8{0, 7, 255}) }),
	}
	ps := TensorsToProto(in)
	if ps[0].Datatype != "BOOL" || !reflect.DeepEqual(ps[0].RawData, []byte{1, 0, 0, 1}) ||
		ps[1].Datatype != "UINT8" || !reflect.DeepEqual(ps[1].RawData, []byte{0, 7, 255}) {
		t.Fatalf("TensorsToProto = %v", ps)
	}
	back, err := TensorsFromProto(ps)
	if err != nil {
		t.Fatal(err)
	}
	for i := range in {
		if back[i].DType != in[i].DType || !reflect.DeepEqual(back[i].Data, in[i].Data) || !reflect.DeepEqual(back[i].Shape, in[i].Shape) {
			t.Errorf("tensor %d: got %+v, want %+v", i, back[i], in[i])
		}
	}
}
