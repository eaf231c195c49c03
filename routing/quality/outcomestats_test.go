package quality

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestOutcomeStatsJSONHasThePinnedNamesAndNullForUndefined(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	w := NewOutcomeWindows[Binary](t0)
	s, m := w.At(t0)
	s.Add(0.2, false) // no positive yet: calibration and auc undefined
	m.Add(0.2, false)
	st := w.OutcomeStats(t0)
	var p Paired
	st.VsChampion = p.Delta(0).VsChampion()
	data, err := json.Marshal(st)
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	var doc map[string]map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for _, window := range []string{"since_valid", "last_1h"} {
		f := doc[window]
		for _, k := range []string{"count", "positives", "mean_prediction", "observed_rate", "calibration", "ece", "bins", "logloss", "brier", "auc"} {
			if _, ok := f[k]; !ok {
				t.Errorf("%s has no %q: %s", window, k, data)
			}
		}
		if f["calibration"] != nil || f["auc"] != nil || f["count"] != 1.0 || f["mean_prediction"] != 0.2 {
			t.Errorf("%s: %v", window, f)
		}
		if _, ok := f["mae"]; ok {
			t.Errorf("%s: a binary window has numeric figures", window)
		}
	}
	vs := doc["vs_champion"]
	for _, k := range []string{"n", "logloss_delta", "ci95", "auc_delta"} {
		if v, ok := vs[k]; !ok || (k != "n" && v != nil) {
			t.Errorf("vs_champion %q = %v (present %v), want null", k, v, ok)
		}
	}
}

func TestOutcomeStatsJSONOfNumericAndAComparison(t *testing.T) {
	var n Numeric
	n.Add(3, 1)
	n.Add(1, 2)
	data, _ := json.Marshal(n.Figures())
	if got, want := string(data), `{"count":2,"mae":1.5,"rmse":1.5811388300841898,"bias":0.5,"mean_outcome":1.5}`; got != want {
		t.Errorf("numeric %s, want %s", got, want)
	}
	var p Paired
	for i := range 100 {
		p.Add(0.3, 0.3+float64(i%5)/100, i%3 == 0)
	}
	data, _ = json.Marshal(p.Delta(DefaultConfidence).VsChampion())
	if !strings.Contains(string(data), `"n":100,"method":"paired","logloss_delta":`) || !strings.Contains(string(data), `"ci95":[`) {
		t.Errorf("vs_champion %s", data)
	}
	// NaN or infinite never reach JSON, even when a sum overflowed.
	var big Numeric
	big.Add(1e200, -1e200)
	big.Add(1e200, -1e200)
	data, err := json.Marshal(big.Figures())
	if err != nil || !strings.Contains(string(data), `"rmse":null`) {
		t.Errorf("overflowed: %s %v", data, err)
	}
	if v := number(math.Inf(-1)); v != nil {
		t.Errorf("number(-Inf) = %v", *v)
	}
}
