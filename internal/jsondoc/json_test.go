package jsondoc

import "testing"

func TestBlankTrailingCommasLeavesStringsAlone(t *testing.T) {
	in := `{"a": ",]", "b": "\",}", "c": [1,],}`
	want := `{"a": ",]", "b": "\",}", "c": [1 ] }`
	if got := string(BlankTrailingCommas([]byte(in))); got != want {
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

func TestIntegral(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "-0": true, "12": true, "1.0": true, "1.5": false, "15e-1": false, "150e-2": false, "1500e-3": false,
		"1.5e1": true, "0.05e2": true, "0.005e2": false, "1e400": true, "1e-400": false, "0e-400": true, "0.0e-999999999999999999999": true,
		"5e999999999999999999999": true, "5e-999999999999999999999": false, "1.000000000000000000001": false, "2E+3": true,
	} {
		if got := integral(s); got != want {
			t.Errorf("integral(%q) = %v, want %v", s, got, want)
		}
	}
}
