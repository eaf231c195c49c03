package forward

import (
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/cluster/forward/forwardpb"
	"github.com/groveml/grove/servables"
)

// f32 makes a FLOAT tensor.
func f32(t testing.TB, name string, shape []int64, vals ...float32) servables.Tensor {
	t.Helper()
	x, err := servables.NewTensor(name, servables.Float32, shape)
	if err != nil {
		t.Fatal(err)
	}
	if copy(x.Float32s(), vals) != len(vals) || len(vals) != x.Len() {
		t.Fatalf("%d values for shape %v", len(vals), shape)
	}
	return x
}

// everyType is one tensor of every type, with distinct values.
func everyType(t *testing.T) []servables.Tensor {
	var ts []servables.Tensor
	for _, dt := range []servables.DType{servables.Float32, servables.Float64, servables.Int8, servables.Int16, servables.Int32,
		servables.Int64, servables.Uint8, servables.Float16, servables.BFloat16} {
		x, err := servables.NewTensor("t_"+dt.String(), dt, []int64{2, 3})
		if err != nil {
			t.Fatal(err)
		}
		for i := range x.Data {
			x.Data[i] = byte(i*7 + int(dt))
		}
		ts = append(ts, x)
	}
	b, _ := servables.NewTensor("t_BOOL", servables.Bool, []int64{3})
	b.Data[1] = 1
	s, err := servables.NewStringTensor("t_BYTES", []int64{2}, []string{"héllo", ""})
	if err != nil {
		t.Fatal(err)
	}
	scalar := f32(t, "scalar", []int64{}, 2.5)
	return append(ts, b, s, scalar)
}

func TestRequestRoundTrip(t *testing.T) {
	// In a bubble, whose clock stands still: the start-by the request
	// carries as a time left arrives as the same instant.
	synctest.Test(t, func(t *testing.T) {
		caller := auth.Identity{Name: "alice", Roles: []auth.Role{auth.RoleInfer, auth.RoleRead}, Method: "jwt"}
		in := Request{ModelPath: "m/", Inputs: everyType(t), Positional: true, TypeNamed: true, RequestID: "r1", Priority: Shadow, Caller: caller,
			API: "ba", Configs: map[string]string{"k": "v"}, Contract: "o/p/1", Release: "v2", StartBy: time.Now().Add(time.Second)}
		b, err := proto.Marshal(encodeRequest(&in))
		if err != nil {
			t.Fatal(err)
		}
		var m forwardpb.PredictRequest
		if err := proto.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m.GetHops() != 1 {
			t.Fatalf("hops %d", m.GetHops())
		}
		out, err := decodeRequest(&m, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(out, in) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", out, in)
		}
		for _, x := range out.Inputs {
			if x.DType != servables.Bytes && uintptr(unsafe.Pointer(&x.Data[0]))%8 != 0 {
				t.Fatalf("%s: data not 8-byte aligned", x.Name)
			}
		}
		// No caller: none on the wire, none decoded.
		in.Caller = auth.Identity{}
		if m := encodeRequest(&in); m.Caller != nil {
			t.Fatalf("empty identity sent as %v", m.Caller)
		}
	})
}

// A shadow copy's start-by travels as the time left when it is sent and
// is a time on the serving node's clock when it arrives: none stays none
// (as from a node that does not send it), and one already past arrives
// past (at least 1 ns is sent), never as none.
func TestStartByTravelsAsTheTimeLeft(t *testing.T) {
	sent := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	received := sent.Add(7 * time.Millisecond) // the serving node's clock when it arrives
	for _, tc := range []struct {
		name    string
		startBy time.Time
		within  int64
		want    time.Time
	}{
		{"none", time.Time{}, 0, time.Time{}},
		{"ahead", sent.Add(time.Second), int64(time.Second), received.Add(time.Second)},
		{"already late", sent.Add(-time.Second), 1, received.Add(1)},
	} {
		if got := startWithin(tc.startBy, sent); got != tc.within {
			t.Errorf("%s: start_within_nanos %d, want %d", tc.name, got, tc.within)
		}
		m := &forwardpb.PredictRequest{ModelPath: "m/", Priority: forwardpb.Priority_PRIORITY_SHADOW, Hops: 1, StartWithinNanos: tc.within}
		r, err := decodeRequest(m, received)
		if err != nil {
			t.Fatal(err)
		}
		if !r.StartBy.Equal(tc.want) {
			t.Errorf("%s: arrives with start-by %v, want %v", tc.name, r.StartBy, tc.want)
		}
	}
}

func TestAnswerRoundTrip(t *testing.T) {
	in := Answer{Node: "b", Checksum: "abc", Outputs: everyType(t), UnnamedOutputs: true, Queued: 1234, Compute: 5678}
	b, err := proto.Marshal(encodeAnswer(&in, "b"))
	if err != nil {
		t.Fatal(err)
	}
	var m forwardpb.PredictResponse
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	out, err := decodeAnswer(&m)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(out, in) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", out, in)
	}
}

// TestDecodeAligns checks that data at an odd address is copied to aligned
// memory with its values intact.
func TestDecodeAligns(t *testing.T) {
	buf := make([]byte, 8*3+1)
	odd := buf[1:]
	for i, v := range []float64{1.5, -2, math.Pi} {
		binary.LittleEndian.PutUint64(odd[i*8:], math.Float64bits(v))
	}
	ts, err := decodeTensors("input", []*forwardpb.Tensor{{Name: "x", Datatype: "DOUBLE", Shape: []int64{3}, Data: odd}})
	if err != nil {
		t.Fatal(err)
	}
	if uintptr(unsafe.Pointer(&ts[0].Data[0]))%8 != 0 {
		t.Fatal("data left unaligned")
	}
	if got := ts[0].Float64s(); !reflect.DeepEqual(got, []float64{1.5, -2, math.Pi}) {
		t.Fatalf("values %v", got)
	}
}

func TestDecodeRefuses(t *testing.T) {
	ok := func() *forwardpb.PredictRequest {
		return &forwardpb.PredictRequest{ModelPath: "m/", Priority: forwardpb.Priority_PRIORITY_USER, Hops: 1,
			Inputs: []*forwardpb.Tensor{{Name: "x", Datatype: "FLOAT", Shape: []int64{1, 2}, Data: make([]byte, 8)}}}
	}
	if _, err := decodeRequest(ok(), time.Now()); err != nil {
		t.Fatalf("valid request refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(m *forwardpb.PredictRequest)
		want string
	}{
		{"no model", func(m *forwardpb.PredictRequest) { m.ModelPath = "" }, "model_path is empty"},
		{"no priority", func(m *forwardpb.PredictRequest) { m.Priority = 0 }, "priority PRIORITY_UNSPECIFIED is not"},
		{"unknown priority", func(m *forwardpb.PredictRequest) { m.Priority = 9 }, "priority 9 is not"},
		{"unknown role", func(m *forwardpb.PredictRequest) {
			m.Caller = &forwardpb.Caller{Name: "bob", Roles: []string{"infer", "root"}, Method: "token"}
		}, `caller "bob": unknown role "root"`},
		{"unknown type", func(m *forwardpb.PredictRequest) { m.Inputs[0].Datatype = "FP32" }, `input 0 ("x"): unknown datatype "FP32"`},
		{"short data", func(m *forwardpb.PredictRequest) { m.Inputs[0].Data = m.Inputs[0].Data[:7] }, `input 0 ("x"): invalid tensor shape: 7 bytes of FLOAT do not fill shape [1 2]`},
		{"zero dimension", func(m *forwardpb.PredictRequest) { m.Inputs[0].Shape = []int64{0, 2} }, `input 0 ("x"): invalid tensor shape: dimension 0 is 0`},
		{"huge shape", func(m *forwardpb.PredictRequest) { m.Inputs[0].Shape = []int64{1 << 40, 1 << 40} }, "exceeds"},
		{"bad bytes framing", func(m *forwardpb.PredictRequest) {
			m.Inputs[0] = &forwardpb.Tensor{Name: "s", Datatype: "BYTES", Shape: []int64{1}, Data: []byte{9, 0, 0, 0, 'a'}}
		}, `input 0 ("s"): invalid tensor shape: BYTES element 0 at byte 0 has length 9`},
		{"bool not 0 or 1", func(m *forwardpb.PredictRequest) {
			m.Inputs[0] = &forwardpb.Tensor{Name: "b", Datatype: "BOOL", Shape: []int64{2}, Data: []byte{1, 2}}
		}, `input 0 ("b"):`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := ok()
			tc.edit(m)
			_, err := decodeRequest(m, time.Now())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestCheckRequest(t *testing.T) {
	for _, tc := range []struct {
		r    Request
		want string
	}{
		{Request{Priority: User}, "no model path"},
		{Request{ModelPath: "m/"}, "priority Priority(0) is not user or shadow"},
		{Request{ModelPath: "m/", Priority: 3}, "priority Priority(3)"},
	} {
		if err := checkRequest(&tc.r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("checkRequest(%+v) = %v, want %q", tc.r, err, tc.want)
		}
	}
	if err := checkRequest(&Request{ModelPath: "m/", Priority: User}); err != nil {
		t.Fatal(err)
	}
}
