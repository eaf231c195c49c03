package actors

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/logging/audit"
)

// entries is a Recorder that keeps what it is given.
type entries []audit.Entry

func (e *entries) Record(_ context.Context, en audit.Entry) { *e = append(*e, en) }

// recordedCall runs write in a recorded call and returns its entry.
func recordedCall(t *testing.T, write func(ctx context.Context) error) audit.Entry {
	t.Helper()
	var got entries
	ctx, w := audit.Begin(context.Background(), &got, audit.Op{API: "test", Route: "TEST"})
	err := write(ctx)
	w.Finish(ctx, "", err)
	if len(got) != 1 {
		t.Fatalf("%d entries, want 1", len(got))
	}
	return got[0]
}

func TestManagementWritesNoteWhatTheyChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, promotionConfig, map[string]faultySpec{"a/": version(1), "b/": version(2), "c/": version(3)})
		defer w.stop()
		synctest.Wait()

		e := recordedCall(t, func(ctx context.Context) error {
			_, err := w.sys.EditConfig(ctx, func(c *modelconfig.Config) error { return c.SetPolicy("ads/pctr/1", "v2", modelconfig.Policy{}) })
			return err
		})
		before, after := string(e.Before[audit.SectionModelConfig]), string(e.After[audit.SectionModelConfig])
		if !strings.Contains(before, `"valid_after_ms"`) || strings.Contains(after, `"valid_after_ms"`) || strings.Contains(before, `"ads","project":"off"`) || !strings.HasPrefix(before, `{"model_metadata":[],`) {
			t.Errorf("policy change: before %s after %s", before, after)
		}

		e = recordedCall(t, func(ctx context.Context) error {
			_, err := w.sys.SetMetrics(ctx, "ads/pctr/1", "v2", modelconfig.MetricsUpdate{Set: map[string]float64{"auc": 0.8}})
			return err
		})
		var st struct {
			Contracts map[string]map[string]struct {
				Metrics map[string]float64 `json:"metrics"`
			} `json:"contracts"`
		}
		if err := json.Unmarshal(e.After[audit.SectionContractState], &st); err != nil || st.Contracts["ads/pctr/1"]["v2"].Metrics["auc"] != 0.8 {
			t.Errorf("metrics: after %s (%v)", e.After[audit.SectionContractState], err)
		}

		e = recordedCall(t, func(ctx context.Context) error { return w.sys.DeleteServable(ctx, "ads/pctr/1", "v2") })
		if e.Before[audit.SectionContractState] == nil || e.After[audit.SectionContractState] != nil ||
			!strings.Contains(string(e.Before[audit.SectionModelConfig]), `"release_version":"v2"`) ||
			strings.Contains(string(e.After[audit.SectionModelConfig]), `"release_version":"v2"`) {
			t.Errorf("delete: before %s after %s", e.Before, e.After)
		}

		name, data := modelFile(t, "r/", version(9))
		e = recordedCall(t, func(ctx context.Context) error {
			return w.sys.RegisterModel(ctx, "r/", map[string][]byte{name: data}, "")
		})
		var m audit.Model
		if err := json.Unmarshal(e.After[audit.SectionRegisteredModel], &m); err != nil || m.Path != "r/" || m.Checksum != checksumOf(t, "r/", version(9)) || m.Files[name] != len(data) || e.Before != nil {
			t.Errorf("register: %+v, after %s (%v)", e, e.After[audit.SectionRegisteredModel], err)
		}
		e = recordedCall(t, func(ctx context.Context) error { return w.sys.DeleteModel(ctx, "r/") })
		if err := json.Unmarshal(e.Before[audit.SectionRegisteredModel], &m); err != nil || m.Checksum == "" || e.After != nil {
			t.Errorf("delete model: %+v (%v)", e, err)
		}
		e = recordedCall(t, func(ctx context.Context) error { return w.sys.DeleteModel(ctx, "r/") })
		if e.Result != audit.ResultError || e.Before != nil || e.After != nil {
			t.Errorf("a refused delete: %+v", e)
		}
	})
}
