package forward

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/groveml/grove/servables"
)

// TestModelInfoRoundTrips: a model's description survives the member
// record's JSON, datatypes, the runtime's parameters and the fields
// servables.Metadata keeps out of JSON included.
func TestModelInfoRoundTrips(t *testing.T) {
	info := ModelInfo{Checksum: "abc", LoadedAt: time.Date(2026, 11, 25, 6, 0, 0, 5, time.UTC), Runtime: "onnxruntime",
		Inputs:  []servables.TensorSpec{{Name: "x", DType: servables.Float32, Shape: []int64{-1, 64}}, {Name: "s", DType: servables.Bytes, Optional: true}},
		Outputs: []servables.TensorSpec{{Name: "y", DType: servables.Float16, Shape: []int64{}}}, Signature: servables.SignatureDeclared,
		Parameters: map[string]string{"objective": "binary:logistic", "feature_names": `["a","b"]`},
		ByPosition: true, UnnamedOutputs: true, OutputsDeclared: true, Replicas: 3, MaxBatchRows: 16, MaxQueueDelay: 250 * time.Microsecond, Newest: "v/3/"}
	b, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	var back ModelInfo
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, info) {
		t.Fatalf("round trip of %s:\n got %+v\nwant %+v", b, back, info)
	}
	if m := back.Metadata(); !m.ByPosition || !m.UnnamedOutputs || !m.OutputsDeclared || m.Runtime != "onnxruntime" || len(m.Inputs) != 2 ||
		m.Parameters["objective"] != "binary:logistic" {
		t.Errorf("metadata %+v", m)
	}
	if err := json.Unmarshal([]byte(`{"inputs":[{"name":"x","datatype":"FP99"}]}`), &back); err == nil {
		t.Error("an unknown datatype decoded")
	}
}
