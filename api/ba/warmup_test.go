package ba

import (
	"strings"
	"testing"
)

func TestParseWarmUpReturnsEachItemsInputs(t *testing.T) {
	sets, err := ParseOptions{}.ParseWarmUp(`{"request":[
		{"model_path":"m/","tensors":[{"data_type":"FLOAT","tensor_shape":[1,2],"tensor_content":["1","2"]}]},
		{"model_path":"m/","tensors":[{"data_type":"INT64","tensor_shape":[1],"tensor_content":["3"]},{"data_type":"DOUBLE","tensor_shape":[1],"tensor_content":["4"]}]}]}`, "m/")
	if err != nil {
		t.Fatal(err)
	}
	if len(sets) != 2 || len(sets[0]) != 1 || len(sets[1]) != 2 || sets[1][0].Int64s()[0] != 3 {
		t.Fatalf("sets = %+v", sets)
	}
}

func TestParseWarmUpRejectsBadRequests(t *testing.T) {
	item := `{"model_path":"m/","tensors":[{"data_type":"FLOAT","tensor_shape":[1],"tensor_content":["1"]}]}`
	for name, tc := range map[string]struct{ json, want string }{
		"malformed":       {`{"request":[`, "parsing error"},
		"no items":        {`{"request":[]}`, "no items"},
		"other model":     {`{"request":[` + strings.Replace(item, "m/", "other/", 1) + `]}`, "different model path"},
		"one item broken": {`{"request":[` + item + `,{"model_path":"m/"}]}`, "item 1"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := (ParseOptions{}).ParseWarmUp(tc.json, "m/"); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}
