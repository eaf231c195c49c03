package jsondoc

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"
)

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

// An integer written with a fraction or an exponent is read exactly, not
// through a double: 2^53+1 is out of range 0..2^53, and MaxInt64 is in
// range of int64.
func TestIntValueIsExactBeyondDoubles(t *testing.T) {
	for _, c := range []struct {
		s      string
		lo, hi int64
		want   int64
		ok     bool
	}{
		{"9007199254740993.0", 0, 1 << 53, 0, false},
		{"9007199254740993e0", 0, 1 << 53, 0, false},
		{"90071992547409930e-1", 0, 1 << 53, 0, false},
		{"9007199254740992.0", 0, 1 << 53, 1 << 53, true},
		{"9007199254740993.0", math.MinInt64, math.MaxInt64, 1<<53 + 1, true},
		{"9223372036854775807.0", math.MinInt64, math.MaxInt64, math.MaxInt64, true},
		{"-9223372036854775808e0", math.MinInt64, math.MaxInt64, math.MinInt64, true},
		{"9223372036854775808.0", math.MinInt64, math.MaxInt64, 0, false},
		{"922337203685477580.7e1", math.MinInt64, math.MaxInt64, math.MaxInt64, true},
		{"0.00000000000000000000000000000000000000012e41", 0, 100, 12, true},
		{"1e2", 0, 100, 100, true},
		{"-0.0e-5", 0, 100, 0, true},
		{"1e400", math.MinInt64, math.MaxInt64, 0, false},
		{"0.1e99999999999999999999", math.MinInt64, math.MaxInt64, 0, false},
		{"1e9223372036854775807", math.MinInt64, math.MaxInt64, 0, false},
		{"12.5e9223372036854775807", math.MinInt64, math.MaxInt64, 0, false},
	} {
		got, err := IntValue("f", json.Number(c.s), c.lo, c.hi)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("IntValue(%s, %d..%d) = %d, %v; want %d, ok %v", c.s, c.lo, c.hi, got, err, c.want, c.ok)
		}
	}
}

// FuzzIntValue reads arbitrary number text as an int64: it answers (a
// value or an error) and never panics, and a value it gives is the
// number's, as exactly as a double can tell below 2^53. The seed corpus
// is in testdata/fuzz/FuzzIntValue.
func FuzzIntValue(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		got, err := IntValue("f", json.Number(s), math.MinInt64, math.MaxInt64)
		if err != nil {
			return
		}
		if v, perr := strconv.ParseFloat(s, 64); perr == nil && math.Abs(v) < 1<<53 && float64(got) != v {
			t.Errorf("IntValue(%q) = %d, the number is %v", s, got, v)
		}
	})
}
