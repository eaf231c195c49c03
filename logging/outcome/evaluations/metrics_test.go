package evaluations

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricsReadTheTableAtScrapeTime: the grove_outcome_* metrics are
// the published totals (the duplicates by kind, the largest lag) and each
// series' since_valid figures, as they are when scraped.
func TestMetricsReadTheTableAtScrapeTime(t *testing.T) {
	j := joinStream(t, 11, 3000)
	tb := NewTable()
	reg := prometheus.NewRegistry()
	reg.MustRegister(tb)
	if got := scraped(t, reg, "grove_outcome_scored_total", nil); got != 0 {
		t.Errorf("an empty table scored %v", got)
	}
	for p, pj := range j.parts {
		apply(t, tb, records(t, pj, int32(p), j.end)...)
	}
	_ = tb.Apply([]byte("junk"), []byte("x"))
	tb.Publish()
	tot := tb.Totals()
	for name, want := range map[string]float64{
		"grove_outcome_predictions_total":            float64(tot.Counters.Predictions),
		"grove_outcome_scored_total":                 float64(tot.Counters.Scored),
		"grove_outcome_joined_total":                 float64(tot.Counters.Joined),
		"grove_outcome_outcomes_total":               float64(tot.Counters.Outcomes),
		"grove_outcome_late_total":                   float64(tot.Counters.Late),
		"grove_outcome_unmatched_total":              float64(tot.Counters.Unmatched),
		"grove_outcome_late_predictions_total":       float64(tot.Counters.LatePredictions),
		"grove_outcome_lag_seconds":                  tot.Lag.Seconds(),
		"grove_outcome_evaluations_unreadable_total": 1,
	} {
		if got := scraped(t, reg, name, nil); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if tot.Counters.Scored == 0 || tot.Counters.Late == 0 {
		t.Fatalf("totals %+v: the test needs scored and late outcomes", tot)
	}
	_, st := tb.Outcomes(contract, "v2", true, "")
	labels := map[string]string{"contract": contract, "release": "v2", "shadow": "true"}
	for name, want := range map[string]float64{
		"grove_outcome_logloss":     *st.SinceValid.LogLoss,
		"grove_outcome_auc":         *st.SinceValid.AUC,
		"grove_outcome_calibration": *st.SinceValid.Calibration,
		"grove_outcome_scored":      float64(st.SinceValid.Count),
	} {
		if got := scraped(t, reg, name, labels); got != want {
			t.Errorf("%s%v = %v, want %v", name, labels, got, want)
		}
	}
	if c := *st.SinceValid.Calibration; c < 1.3 {
		t.Errorf("the 1.5× shadow's calibration is %v", c)
	}
}

// scraped returns the value of metric name with labels as reg gathers it.
func scraped(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if labels[l.GetName()] != l.GetValue() {
					found = append(found, l.GetName()+"="+l.GetValue())
					continue next
				}
			}
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s with %v (%s)", name, labels, strings.Join(found, " "))
	return 0
}
