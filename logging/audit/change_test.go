package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/groveml/grove/conf/modelconfig"
)

// recorderFunc is a Recorder that hands each entry to a test.
type recorderFunc func(Entry)

func (f recorderFunc) Record(_ context.Context, e Entry) { f(e) }

func parseConfig(t *testing.T, s string) *modelconfig.Config {
	t.Helper()
	c, err := modelconfig.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConfigChangeKeepsOnlyWhatChanged(t *testing.T) {
	const models = `{"model_path": "a/"}, {"model_path": "b/"}`
	base := `{"model_metadata": [` + models + `], "contracts": [
	  {"organization": "ads", "project": "x", "contract_number": 1, "servables": [{"release_version": "v1", "model_path": "a/"}]},
	  {"organization": "ads", "project": "y", "contract_number": 1, "servables": [{"release_version": "v1", "model_path": "b/"}]}]}`
	policy := `{"model_metadata": [` + models + `], "contracts": [
	  {"organization": "ads", "project": "x", "contract_number": 1, "servables": [{"release_version": "v1", "model_path": "a/", "shadow": {"sample_rate": 0.5}}]},
	  {"organization": "ads", "project": "y", "contract_number": 1, "servables": [{"release_version": "v1", "model_path": "b/"}]}]}`
	added := `{"model_metadata": [` + models + `, {"model_path": "c/"}], "contracts": [
	  {"organization": "ads", "project": "x", "contract_number": 1, "servables": [{"release_version": "v1", "model_path": "a/"}]},
	  {"organization": "ads", "project": "y", "contract_number": 1, "servables": [{"release_version": "v1", "model_path": "b/"}]},
	  {"organization": "ads", "project": "z", "contract_number": 1, "servables": [{"release_version": "v1", "model_path": "c/"}]}]}`
	for _, c := range []struct {
		name          string
		before, after *modelconfig.Config
		wantBefore    string
		wantAfter     string
	}{
		{"policy", parseConfig(t, base), parseConfig(t, policy), `ads/x/1 v1 no shadow`, `ads/x/1 v1 shadow`},
		{"new contract and model", parseConfig(t, base), parseConfig(t, added), ``, `ads/z/1 c/`},
		{"first config", nil, parseConfig(t, base), ``, `ads/x/1 ads/y/1 a/ b/`},
		{"nothing", parseConfig(t, base), parseConfig(t, base), ``, ``},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got Entry
			ctx, w := Begin(context.Background(), recorderFunc(func(e Entry) { got = e }), Op{API: "manage", Route: "PUT /x"})
			FromContext(ctx).ConfigChange(c.before, c.after)
			w.Finish(ctx, "200", nil)
			check := func(side string, raw json.RawMessage, want string) {
				t.Helper()
				var doc struct {
					Models []struct {
						Path string `json:"model_path"`
					} `json:"model_metadata"`
					Contracts []struct {
						Org       string `json:"organization"`
						Project   string `json:"project"`
						N         int    `json:"contract_number"`
						Servables []struct {
							Shadow *struct{} `json:"shadow"`
						} `json:"servables"`
					} `json:"contracts"`
				}
				if raw != nil {
					if err := json.Unmarshal(raw, &doc); err != nil {
						t.Fatalf("%s %s: %v", side, raw, err)
					}
				}
				var ids []string
				for _, k := range doc.Contracts {
					id := fmt.Sprintf("%s/%s/%d", k.Org, k.Project, k.N)
					if strings.Contains(want, " v1 ") || strings.HasSuffix(want, " v1") {
						id += " v1"
						if k.Servables[0].Shadow != nil {
							id += " shadow"
						} else {
							id += " no shadow"
						}
					}
					ids = append(ids, id)
				}
				for _, m := range doc.Models {
					ids = append(ids, m.Path)
				}
				if got := strings.Join(ids, " "); got != want {
					t.Errorf("%s: %q (%s), want %q", side, got, raw, want)
				}
			}
			check("before", got.Before[SectionModelConfig], c.wantBefore)
			check("after", got.After[SectionModelConfig], c.wantAfter)
		})
	}
}

func TestAWriteWithoutARecorderRecordsNothing(t *testing.T) {
	ctx, w := Begin(context.Background(), nil, Op{})
	if w != nil || FromContext(ctx) != nil {
		t.Fatal("a write without a recorder has a Write")
	}
	FromContext(ctx).ConfigChange(nil, nil) // no panic
	w.Finish(ctx, "200", nil)
}

func TestCallerGivenFieldsAreClipped(t *testing.T) {
	var got Entry
	long := strings.Repeat("é", maxField)
	ctx, w := Begin(context.Background(), recorderFunc(func(e Entry) { got = e }), Op{API: "oip", Route: "POST /x", Path: "/" + long, Target: long})
	w.Finish(ctx, "409", errors.New(long))
	for name, v := range map[string]string{"path": got.Path, "target": got.Target, "error": got.Error} {
		if len(v) > maxField+len("…") || !strings.HasSuffix(v, "…") || !utf8.ValidString(v) {
			t.Errorf("%s: %d bytes, valid UTF-8 %v", name, len(v), utf8.ValidString(v))
		}
	}
}
