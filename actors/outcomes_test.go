package actors

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/routing/quality"
)

// outcomesConfig learns clicks on a contract whose v1 serves and whose
// v2 and v3 are shadow challengers promoted by their outcome bounds
// alone.
const outcomesConfig = `{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"}, {"model_path": "c/"}],
 "contracts": [{"organization": "ads", "project": "pctr", "contract_number": 1, "router": "latest",
   "outcomes": {"label": "click", "window": "30m"},
   "servables": [
     {"release_version": "v1", "model_path": "a/", "logging": {"log_level": "FULL"}},
     {"release_version": "v2", "model_path": "b/", "shadow": {}, "logging": {"log_level": "FULL"},
      "validity": [{"promote_when": {"min_outcomes": 100, "max_logloss_delta": 0, "calibration_between": [0.9, 1.1]}}]},
     {"release_version": "v3", "model_path": "c/", "shadow": {}, "logging": {"log_level": "FULL"},
      "validity": [{"promote_when": {"min_outcomes": 100, "max_logloss_delta": 0, "calibration_between": [0.9, 1.1]}}]}]}]}`

// seriesKey names a series an OutcomeSource is asked for.
type seriesKey struct {
	release string
	shadow  bool
}

// fixedOutcomes is an OutcomeSource of given figures, which records the
// series and champion it was asked for. While held, it has no figures.
type fixedOutcomes struct {
	rules map[seriesKey]*routing.OutcomeStats
	stats map[seriesKey]*quality.OutcomeStats
	mu    sync.Mutex
	held  bool
	asked map[seriesKey]string // the champion named
}

func (f *fixedOutcomes) Outcomes(contract, release string, shadow bool, champion string) (*routing.OutcomeStats, *quality.OutcomeStats) {
	k := seriesKey{release, shadow}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held {
		return nil, nil
	}
	if contract == "ads/pctr/1" {
		f.asked[k] = champion
	}
	return f.rules[k], f.stats[k]
}

// TestOutcomeFiguresDecideTheGatesAndShowInTheStats: a shadow challenger
// is judged by its shadow series' figures from the OutcomeSource: v2,
// calibrated and better than the champion, is promoted; v3, whose
// calibration is out of range, stays waiting with the reason (its served
// series, in range, is not what promote_when reads). The stats show each
// servable's figures, asked with the champion: v1, valid since its load,
// before the figures that promote v2 exist.
func TestOutcomeFiguresDecideTheGatesAndShowInTheStats(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		good := &routing.OutcomeStats{Scored: 500, Calibration: 1.02, LogLoss: 0.3,
			VsChampion: routing.Paired{N: 500, LogLossDelta: -0.01, LogLossDeltaSE: 0.002}}
		high := &routing.OutcomeStats{Scored: 500, Calibration: 1.5, LogLoss: 0.3,
			VsChampion: routing.Paired{N: 500, LogLossDelta: -0.01, LogLossDeltaSE: 0.002}}
		calibrated := &routing.OutcomeStats{Scored: 500, Calibration: 1, VsChampion: routing.Paired{N: 500, LogLossDelta: -1}}
		one := func(n uint64) *quality.OutcomeStats {
			return &quality.OutcomeStats{SinceValid: quality.OutcomeFigures{Count: n}}
		}
		src := &fixedOutcomes{asked: map[seriesKey]string{}, held: true,
			rules: map[seriesKey]*routing.OutcomeStats{{"v2", true}: good, {"v3", true}: high, {"v3", false}: calibrated},
			stats: map[seriesKey]*quality.OutcomeStats{{"v1", false}: one(1), {"v2", false}: one(2), {"v2", true}: one(20), {"v3", true}: one(30)}}
		w := newWorld(t, outcomesConfig, map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3)},
			func(_ *world, o *Options) { o.Outcomes = src })
		defer w.stop()
		// The figures come once every model has loaded and v1 is valid:
		// with them from the start, v2 could be promoted in a plan that
		// ran before v1's load was seen, and be valid the longest.
		w.settle()
		if before, err := w.sys.ContractStats("ads/pctr/1"); err != nil || len(before) != 3 || !before[0].Valid || before[1].Valid {
			t.Fatalf("before the figures, want v1 valid and v2 not: %v %+v", err, before)
		}
		src.mu.Lock()
		src.held = false
		src.mu.Unlock()
		time.Sleep(5 * time.Second)
		synctest.Wait()
		stats, err := w.sys.ContractStats("ads/pctr/1")
		if err != nil || len(stats) != 3 {
			t.Fatalf("stats: %v %+v", err, stats)
		}
		v1, v2, v3 := stats[0], stats[1], stats[2]
		if !v2.Valid || v2.Gate == nil || v2.Gate.State != "promoted" {
			t.Errorf("v2, calibrated and better, is not promoted: valid %v gate %+v", v2.Valid, v2.Gate)
		}
		if v3.Valid || v3.Gate == nil || !strings.Contains(v3.Gate.Detail, "calibration 1.5 over 500 scored outcomes outside [0.9, 1.1]") {
			t.Errorf("v3, 1.5× too high, is not waiting on its calibration: valid %v gate %+v", v3.Valid, v3.Gate)
		}
		// Once promoted, v2 is valid: its stats are those of what it
		// served; v3's those of its shadow predictions; the champion v1
		// is named to each.
		for _, c := range []struct {
			name string
			got  *quality.OutcomeStats
			want uint64
		}{{"v1", v1.Outcomes, 1}, {"v2", v2.Outcomes, 2}, {"v3", v3.Outcomes, 30}} {
			if c.got == nil || c.got.SinceValid.Count != c.want {
				t.Errorf("%s: stats' outcomes %+v, want the source's series of count %d", c.name, c.got, c.want)
			}
		}
		src.mu.Lock()
		defer src.mu.Unlock()
		for k, want := range map[seriesKey]string{{"v1", false}: "v1", {"v2", false}: "v1", {"v3", true}: "v1"} {
			if got, ok := src.asked[k]; !ok || got != want {
				t.Errorf("%v: asked with champion %q (asked %v), want %q", k, got, ok, want)
			}
		}
	})
}
