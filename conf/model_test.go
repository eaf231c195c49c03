package conf

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

const sum1 = "59390c4fa97b2cbfe5bd300e254e6eddb7b4b45c2dbc0c1cfc6e93793a143d04"

func TestParseModelConfigReadsAllFields(t *testing.T) {
	data := `{"model_metadata": [
		{"model_path": "pcvr_v1/", "checksum": "` + sum1 + `",
		 "warm_up_batch_request_json": "{\"request\": []}", "eviction_grace_period_in_ms": 60000},
		{"model_path": "pcvr/model.pt"}
	]}`
	got, err := ParseModelConfig([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := &ModelConfig{Models: []ModelMetadata{
		{Path: "pcvr_v1/", Checksum: sum1, WarmUpJSON: `{"request": []}`, EvictionGracePeriod: time.Minute},
		{Path: "pcvr/model.pt"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if !got.Models[0].IsDir() || got.Models[1].IsDir() {
		t.Errorf("IsDir: got %v, %v; want true, false", got.Models[0].IsDir(), got.Models[1].IsDir())
	}
}

func TestParseModelConfigAcceptsLowerCamelCaseNames(t *testing.T) {
	data := `{"modelMetadata": [{"modelPath": "m/", "checksum": "", "warmUpBatchRequestJson": "[]", "evictionGracePeriodInMs": 5}]}`
	got, err := ParseModelConfig([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	want := ModelMetadata{Path: "m/", WarmUpJSON: "[]", EvictionGracePeriod: 5 * time.Millisecond}
	if len(got.Models) != 1 || got.Models[0] != want {
		t.Errorf("got %+v, want [%+v]", got.Models, want)
	}
}

func TestParseModelConfigAcceptsTheDocumentedExampleWithTrailingCommas(t *testing.T) {
	// From the B&A inference API docs, trailing commas included.
	data := `{
  "model_metadata": [
    {
      "model_path": "pcvr_v1/",
      "checksum": "dd94b3b08ea19b4240aa5e5f68ff0447b40e37ebdd06cc76fa1a2cf61143a10c",
      "eviction_grace_period_in_ms": 60000,
    },
  ]
}`
	got, err := ParseModelConfig([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Models) != 1 || got.Models[0].EvictionGracePeriod != time.Minute {
		t.Errorf("got %+v", got.Models)
	}
}

func TestParseModelConfigGracePeriodForms(t *testing.T) {
	for _, tc := range []struct {
		value string
		want  time.Duration
	}{
		{`0`, 0},
		{`60000`, time.Minute},
		{`"60000"`, time.Minute},
		{`6e4`, time.Minute},
		{`"6e4"`, time.Minute},
		{`60000.0`, time.Minute},
		{`2147483647`, 2147483647 * time.Millisecond},
		{`null`, 0},
	} {
		got, err := ParseModelConfig([]byte(`{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":` + tc.value + `}]}`))
		if err != nil {
			t.Errorf("%s: %v", tc.value, err)
			continue
		}
		if g := got.Models[0].EvictionGracePeriod; g != tc.want {
			t.Errorf("%s: got %v, want %v", tc.value, g, tc.want)
		}
	}
}

func TestParseModelConfigNullsAndEmptyMeanDefaults(t *testing.T) {
	for _, data := range []string{`{}`, `{"model_metadata": null}`, `{"model_metadata": []}`} {
		got, err := ParseModelConfig([]byte(data))
		if err != nil {
			t.Errorf("%s: %v", data, err)
		} else if len(got.Models) != 0 {
			t.Errorf("%s: got %+v, want no models", data, got.Models)
		}
	}
	got, err := ParseModelConfig([]byte(`{"model_metadata": [{"model_path": "m", "checksum": null}]}`))
	if err != nil || got.Models[0].Checksum != "" {
		t.Errorf("null checksum: got %+v, %v", got, err)
	}
}

func TestParseModelConfigErrors(t *testing.T) {
	long := strings.Repeat("a", 64)
	for _, tc := range []struct {
		name, data, want string
	}{
		{"unknown entry field", `{"model_metadata":[{"model_path":"a"},{"model_path":"b","checksumm":""}]}`,
			`model_metadata[1]: unknown field "checksumm"`},
		{"unknown top-level field", `{"models":[]}`, `unknown field "models"`},
		{"duplicate key", `{"model_metadata":[{"model_path":"a","model_path":"b"}]}`,
			`model_metadata[0]: duplicate field "model_path"`},
		{"duplicate key in two spellings", `{"model_metadata":[{"model_path":"a","modelPath":"b"}]}`,
			`model_metadata[0]: duplicate field "modelPath" (already given as "model_path")`},
		{"duplicate section", `{"model_metadata":[],"modelMetadata":[]}`, `duplicate field "modelMetadata"`},
		{"not an object", `[]`, "model config must be a JSON object, got an array"},
		{"syntax error", "{\n  \"model_metadata\": [\n  {\"model_path\" \"a\"}]}", "invalid JSON at line 3, column"},
		{"truncated", `{"model_metadata": [`, "unexpected EOF"},
		{"trailing data", `{} {}`, "unexpected data after the model config object"},
		{"comma only", `{"model_metadata": [,]}`, "invalid JSON"},
		{"double comma", `{"model_metadata": [{"model_path":"a"},,]}`, "invalid JSON"},
		{"invalid UTF-8", "{\"model_metadata\": [{\"model_path\": \"\xff\"}]}", "not valid UTF-8"},
		{"path not a string", `{"model_metadata":[{"model_path":5}]}`, `model_metadata[0].model_path: expected a string, got number 5`},
		{"entry not an object", `{"model_metadata":["m"]}`, `model_metadata[0]: expected an object, got string "m"`},
		{"null entry", `{"model_metadata":[null]}`, `model_metadata[0]: expected an object, got null`},
		{"section not an array", `{"model_metadata":{}}`, `model_metadata: expected an array, got an object`},
		{"empty path", `{"model_metadata":[{"checksum":""}]}`, `model_metadata[0].model_path: must not be empty`},
		{"absolute path", `{"model_metadata":[{"model_path":"/m"}]}`, `model_metadata[0].model_path: "/m" must not start with "/"`},
		{"dotdot path", `{"model_metadata":[{"model_path":"a/../b"}]}`, `model_metadata[0].model_path: "a/../b" must not contain ".." segments`},
		{"backslash path", `{"model_metadata":[{"model_path":"a\\b"}]}`, `must not contain backslashes`},
		{"NUL path", `{"model_metadata":[{"model_path":"a\u0000b"}]}`, `must not contain NUL bytes`},
		{"duplicate path", `{"model_metadata":[{"model_path":"a/"},{"model_path":"b"},{"model_path":"a/"}]}`,
			`model_metadata[2].model_path: duplicate model path "a/" (also in model_metadata[0])`},
		{"uppercase checksum", `{"model_metadata":[{"model_path":"m","checksum":"` + strings.ToUpper(sum1) + `"}]}`,
			`checksums are lowercase hex`},
		{"short checksum", `{"model_metadata":[{"model_path":"m","checksum":"abc"}]}`, `model_metadata[0].checksum: "abc" has 3 characters`},
		{"long checksum", `{"model_metadata":[{"model_path":"m","checksum":"` + long + `0"}]}`, `has 65 characters`},
		{"non-hex checksum", `{"model_metadata":[{"model_path":"m","checksum":"` + long[:63] + `g"}]}`, `is not hex`},
		{"bad warm-up JSON", `{"model_metadata":[{"model_path":"m","warm_up_batch_request_json":"{"}]}`,
			`model_metadata[0].warm_up_batch_request_json: not valid JSON`},
		{"negative grace", `{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":-1}]}`,
			`model_metadata[0].eviction_grace_period_in_ms: -1 is out of range 0..2147483647`},
		{"grace over int32", `{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":2147483648}]}`, `2147483648 is out of range 0..2147483647`},
		{"quoted grace over int32", `{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":"2147483648"}]}`, `out of range`},
		{"negative exponent grace", `{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":-1e3}]}`, `out of range`},
		{"huge grace", `{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":1e400}]}`, `out of range`},
		{"fractional grace", `{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":1.5}]}`, `1.5 is not an integer`},
		{"grace not a number", `{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":"1s"}]}`, `"1s" is not a number`},
		{"grace with spaces", `{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":" 1"}]}`, `" 1" is not a number`},
		{"grace boolean", `{"model_metadata":[{"model_path":"m","eviction_grace_period_in_ms":true}]}`, `expected an integer, got boolean true`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseModelConfig([]byte(tc.data))
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("error %T is not a *ConfigError", err)
			}
		})
	}
}

func TestParseModelConfigSeparatesSingleFileFromDirectoryPaths(t *testing.T) {
	got, err := ParseModelConfig([]byte(`{"model_metadata":[{"model_path":"model1"},{"model_path":"model1/"}]}`))
	if err != nil {
		t.Fatalf("model1 and model1/ are different models: %v", err)
	}
	if got.Models[0].IsDir() || !got.Models[1].IsDir() {
		t.Errorf("IsDir: got %v, %v", got.Models[0].IsDir(), got.Models[1].IsDir())
	}
}

func TestBlankTrailingCommasLeavesStringsAlone(t *testing.T) {
	in := `{"a": ",]", "b": "\",}", "c": [1,],}`
	want := `{"a": ",]", "b": "\",}", "c": [1 ] }`
	if got := string(blankTrailingCommas([]byte(in))); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestLowerCamel(t *testing.T) {
	for in, want := range map[string]string{
		"model_metadata":              "modelMetadata",
		"warm_up_batch_request_json":  "warmUpBatchRequestJson",
		"eviction_grace_period_in_ms": "evictionGracePeriodInMs",
		"checksum":                    "checksum",
	} {
		if got := lowerCamel(in); got != want {
			t.Errorf("lowerCamel(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParseModelConfig checks that parsing never panics, that accepted
// configs are valid, and that they survive a round trip through JSON.
func FuzzParseModelConfig(f *testing.F) {
	f.Add([]byte(`{"model_metadata":[{"model_path":"pcvr_v1/","checksum":"` + sum1 + `","warm_up_batch_request_json":"{}","eviction_grace_period_in_ms":60000}]}`))
	f.Add([]byte(`{"modelMetadata":[{"modelPath":"m","evictionGracePeriodInMs":"5",},]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseModelConfig(data)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not a *ConfigError: %v", err, err)
			}
			return
		}
		if err := c.validate(); err != nil {
			t.Fatalf("accepted an invalid config: %v", err)
		}
		type entry struct {
			Path     string `json:"model_path"`
			Checksum string `json:"checksum,omitempty"`
			WarmUp   string `json:"warm_up_batch_request_json,omitempty"`
			GraceMs  int64  `json:"eviction_grace_period_in_ms,omitempty"`
		}
		var doc struct {
			Models []entry `json:"model_metadata"`
		}
		for _, m := range c.Models {
			doc.Models = append(doc.Models, entry{m.Path, m.Checksum, m.WarmUpJSON, m.EvictionGracePeriod.Milliseconds()})
		}
		again, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		c2, err := ParseModelConfig(again)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", again, err)
		}
		if len(c.Models) == 0 && len(c2.Models) == 0 {
			return
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip changed the config:\n%+v\n%+v", c, c2)
		}
	})
}
