package ba

import (
	"cmp"
	"encoding/json"
	"fmt"
	"testing"
)

// seedRequest is the batch request of the B&A inference API documentation.
const seedRequest = `{
  "request": [
    {
      "model_path": "pcvr_v1/",
      "tensors": [
        {
          "tensor_name": "feature1",
          "data_type": "DOUBLE",
          "tensor_shape": [2, 1],
          "tensor_content": ["0.454920", "-0.25752"]
        }
      ]
    },
    {
      "model_path": "pcvr_v2/",
      "tensors": [
        {
          "tensor_name": "feature1",
          "data_type": "INT32",
          "tensor_shape": [2, 1],
          "tensor_content": ["5", "6"]
        },
        {
          "tensor_name": "feature2",
          "data_type": "FLOAT",
          "tensor_shape": [2, 2],
          "tensor_content": ["0.5", "0.6", "0.7", "0.8"]
        }
      ]
    }
  ]
}`

// fuzzSeeds start FuzzParseRequest and the oracle comparison; the same
// documents are checked in under testdata/fuzz/FuzzParseRequest.
var fuzzSeeds = []string{
	seedRequest,
	``,
	`{"request":[]}`,
	`{"request":[{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[],"tensor_content":["1.5"]}]}]}`,
	`{"request":[{"model_path":"m","tensors":[{"tensor_name":"x","data_type":"INT8","tensor_shape":[3],"tensor_content":["-128"," +127 ","0"]},{"data_type":"INT16","tensor_shape":[1,2],"tensor_content":["32767","-32768"]}]}]}`,
	`{"request":[{"model_path":"m","tensors":[{"data_type":"INT64","tensor_shape":[2],"tensor_content":["9223372036854775807","-9223372036854775808"]},{"data_type":"DOUBLE","tensor_shape":[4],"tensor_content":["1e308","inf","-nan","0x1p-3"]}]}]}`,
	`{"request":[{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[2,2],"tensor_content":[0.5,-1e3,"7",3]}]}]}`,
	`{"configs":{"log_key":"abc"},"request":[{"model_path":"a/","tensors":[{"data_type":"INT32","tensor_shape":[1],"tensor_content":["1"]}]},{"model_path":"b/","tensors":[]}]}`,
	`{"request":[1,{},{"model_path":""},{"model_path":7},{"model_path":"m"},{"model_path":"m","tensors":{}},{"model_path":"m","tensors":[1]}]}`,
	`{"request":[{"model_path":"m","tensors":[{"data_type":"float","tensor_shape":[1],"tensor_content":["1"]}]},{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[0],"tensor_content":[]}]}]}`,
	`{"request":[{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[1.5],"tensor_content":["1"]}]},{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[2],"tensor_content":["1"]}]}]}`,
	`{"request":[{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[65536,65536],"tensor_content":["1"]}]}]}`,
	`{"request":[{"model_path":"m","tensors":[{"data_type":"INT8","tensor_shape":[1],"tensor_content":["128"]}]},{"model_path":"m","tensors":[{"data_type":"INT32","tensor_shape":[1],"tensor_content":["1.0"]}]}]}`,
	`{"request":[{"model_path":"first","model_path":"second","tensors":[{"data_type":"INT32","data_type":"FLOAT","tensor_shape":[1],"tensor_content":["1"]}]}],"request":5}`,
	`{"requ\u0065st":[{"model_path":"\u00e9\ud83d\ude00\n","tensors":[{"tensor_name":"a\"b","data_type":"INT32","tensor_shape":[1],"tensor_content":["\u0031"]}]}]}`,
	`{"request":[{"model_path":"m","tensors":[{"data_type":"INT32","tensor_shape":[1],"tensor_content":[null]}]}]}`,
	`{"request":[],"x":[1,2,{"y":[true,false,null,-0.0e-0]}]}`,
	`[1,]`,
	`{"a":1,}`,
	`{"request":[]} x`,
	`{"request":[{"model_path":"m","tensors":[{"data_type":"FLOAT","tensor_shape":[1],"tensor_content":[1e309]}]}]}`,
	`{"request":"abc\ud800"}`,
	"{\"request\":[\"\xff\"]}",
	"{\"request\":[]}\x00",
}

func FuzzParseRequest(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, opts := range []ParseOptions{{}, {AcceptUnquotedNumbers: true}} {
			checkParse(t, opts, body)
		}
		// Letting numbers through only turns the quote error into an answer.
		strict, _ := ParseOptions{}.ParseRequest(body)
		loose, _ := ParseOptions{AcceptUnquotedNumbers: true}.ParseRequest(body)
		if (strict == nil) != (loose == nil) || strict != nil && len(strict.Items) != len(loose.Items) {
			t.Fatalf("the setting changes the batch: %+v, %+v", strict, loose)
		}
		for i := 0; loose != nil && i < len(loose.Items); i++ {
			if e := strict.Items[i].Err; e == nil || e.Description != msgNotQuoted {
				if a, b := fmt.Sprintf("%+v", strict.Items[i]), fmt.Sprintf("%+v", loose.Items[i]); a != b {
					t.Fatalf("item %d differs with the setting:\n%s\n%s", i, a, b)
				}
			}
		}
	})
}

// checkParse checks the invariants of one parse of body with opts.
func checkParse(t *testing.T, opts ParseOptions, body []byte) {
	t.Helper()
	req, err := opts.ParseRequest(body)
	if err != nil {
		if err.Type != InputParsing || err.Description == "" || req != nil {
			t.Fatalf("bad batch error %+v (request %v)", err, req)
		}
		if out := AppendBatchError(nil, err, ""); !json.Valid(out) {
			t.Fatalf("invalid JSON: %s", out)
		}
		return
	}
	results := make([]Result, len(req.Items))
	for i, it := range req.Items {
		if e := cmp.Or(it.Err, it.InputErr); e != nil {
			if it.Inputs != nil || e.Type != InputParsing || e.Description == "" || it.Err != nil && it.InputErr != nil {
				t.Fatalf("item %d: bad error item %+v", i, it)
			}
			if it.InputErr != nil && it.ModelPath == "" {
				t.Fatalf("item %d: an error found after the model lookup without a model: %+v", i, it)
			}
		} else {
			if it.ModelPath == "" || len(it.Inputs) == 0 {
				t.Fatalf("item %d: accepted without a path or inputs: %+v", i, it)
			}
			for j, tensor := range it.Inputs {
				if verr := tensor.Validate(); verr != nil {
					t.Fatalf("item %d input %d: %v", i, j, verr)
				}
			}
		}
		results[i] = Result{ModelPath: it.ModelPath, Outputs: it.Inputs, Err: cmp.Or(it.Err, it.InputErr)}
	}
	out := AppendResponse(nil, results)
	if !json.Valid(out) {
		t.Fatalf("invalid JSON response: %s", out)
	}
	// The pooled parser must not leak state between calls.
	if a, b := requestSummary(body), requestSummary(body); a != b {
		t.Fatalf("parsing twice differs:\n%s\n%s", a, b)
	}
}
