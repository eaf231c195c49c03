package it

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// switchWatch notes, from the answers of a load (startObservedLoad),
// when the first answer of a version came after a mark.
type switchWatch struct {
	// mark (unix ns) and want (1 or 2): first is when the first answer of
	// version want arrived after mark (0: none yet).
	mark, want, first atomic.Int64
}

// observe is the load's observer.
func (s *switchWatch) observe(version int) {
	now := time.Now().UnixNano()
	if m := s.mark.Load(); m != 0 && now > m && int64(version) == s.want.Load() {
		s.first.CompareAndSwap(0, now)
	}
}

// watch starts watching for the first answer of version after now.
func (s *switchWatch) watch(version int64) time.Time {
	s.mark.Store(0) // no answer counts until the new mark is set
	s.first.Store(0)
	s.want.Store(version)
	at := time.Now()
	s.mark.Store(at.UnixNano())
	return at
}

// switched waits for the first answer of the watched version and returns
// how long after mark it came.
func (s *switchWatch) switched(g *grove, mark time.Time) time.Duration {
	g.waitFor("an answer of the version switched to", 10*time.Second, func() bool { return s.first.Load() != 0 })
	return time.Unix(0, s.first.Load()).Sub(mark)
}

// metricValue reads one sample of /metrics, 0 if absent.
func (g *grove) metricValue(name, labels string) float64 {
	g.t.Helper()
	_, body := g.get("/metrics")
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name+labels) + ` (\S+)$`)
	m := re.FindSubmatch(body)
	if m == nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		g.t.Fatalf("%s%s: %v", name, labels, err)
	}
	return v
}

// keptStatus is a model's kept content in /v1/status.
type keptStatus struct {
	Checksum  string    `json:"checksum"`
	SizeBytes int64     `json:"size_bytes"`
	Until     time.Time `json:"kept_until"`
}

func (g *grove) kept(path string) *keptStatus {
	g.t.Helper()
	_, b := g.get("/v1/status")
	var st struct {
		Models []struct {
			Path string      `json:"model_path"`
			Kept *keptStatus `json:"kept"`
		} `json:"models"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		g.t.Fatalf("decoding status %q: %v", b, err)
	}
	for _, m := range st.Models {
		if m.Path == path {
			return m.Kept
		}
	}
	return nil
}

// TestRollbackUnderLoadFailsNoRequestAndNeedsNoReload serves pctr_v1/
// with keep_previous_for on, updates it in place to the pctr_v2 weights,
// and goes back, under load, (a) by writing the old checksum into the
// config and (b) by POST /v1/rollback: no request fails, nothing is loaded
// again (the bucket holds only the v2 file by then, so a reload of v1
// could not even pass its checksum), and the time from the config write or
// the API call to the first answer of the old weights is measured. The
// config is polled every second.
//
// Budget: 30 s.
func TestRollbackUnderLoadFailsNoRequestAndNeedsNoReload(t *testing.T) {
	t.Parallel()
	exp := loadExpected(t)
	b := newDirBucket(t)
	v1, v2 := exampleModel(t, "pctr_v1"), exampleModel(t, "pctr_v2")
	sum1, sum2 := checksumOf(v1), checksumOf(v2)
	entry := func(sum string) modelEntry {
		return modelEntry{Path: "pctr_v1/", Checksum: sum, GraceMs: 500, WarmUp: batchJSON(requestFor(exp, "pctr_v1", "pctr_v1/"))}
	}
	b.Put(t, "pctr_v1/model.pt", v1)
	putConfig(t, b, entry(sum1))
	g := startOn(t, b, "--keep-previous-for", "5m")
	sw := &switchWatch{}
	l := startObservedLoad(g, exp, 8, sw.observe)
	defer l.finish()
	serving := func(sum string) func() bool {
		return func() bool { _, s, _ := g.status().model("pctr_v1/"); return s == sum }
	}

	// The update, the only load after the first.
	b.Put(t, "pctr_v1/model.pt", v2)
	putConfig(t, b, entry(sum2))
	g.waitFor("the v2 content to serve", 30*time.Second, serving(sum2))
	k := g.kept("pctr_v1/")
	if k == nil || k.Checksum != sum1 || k.SizeBytes != int64(len(v1)) || time.Until(k.Until) < 4*time.Minute {
		t.Fatalf("after the update, kept %+v, want v1's %s (%d bytes) for 5 minutes", k, sum1, len(v1))
	}
	if n := g.metricValue("grove_model_kept_bytes", `{model="pctr_v1/"}`); n != float64(len(v1)) {
		t.Errorf("grove_model_kept_bytes = %v, want %d", n, len(v1))
	}
	loads := g.metricValue("grove_model_loads_total", `{model="pctr_v1/",reason="eager",result="ok"}`) +
		g.metricValue("grove_model_loads_total", `{model="pctr_v1/",reason="update",result="ok"}`)
	if loads != 2 {
		t.Fatalf("%v loads after the update, want 2", loads)
	}

	const rounds = 5
	var byConfig, byAPI, apiSwitch []time.Duration
	for range rounds {
		// (a) The old checksum written into the config, at a random
		// point of the poll interval (the switch waits for the next poll).
		time.Sleep(rand.N(time.Second))
		mark := sw.watch(1)
		putConfig(t, b, entry(sum1))
		byConfig = append(byConfig, sw.switched(g, mark))
		g.waitFor("status to show v1 serving", 10*time.Second, serving(sum1))

		// Forward again (the v2 content is kept now, so this too is instant).
		mark = sw.watch(2)
		putConfig(t, b, entry(sum2))
		sw.switched(g, mark)
		g.waitFor("status to show v2 serving", 10*time.Second, serving(sum2))

		// (b) POST /v1/rollback.
		mark = sw.watch(1)
		resp, err := client.Post(g.url+"/v1/rollback", "application/json", strings.NewReader(`{"model_path": "pctr_v1/"}`))
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Path     string  `json:"model_path"`
			Checksum string  `json:"checksum"`
			From     string  `json:"rolled_back_from"`
			SwitchMs float64 `json:"switch_ms"`
		}
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || got.Path != "pctr_v1/" || got.Checksum != sum1 || got.From != sum2 {
			t.Fatalf("POST /v1/rollback: %d %+v %v", resp.StatusCode, got, err)
		}
		byAPI = append(byAPI, sw.switched(g, mark))
		apiSwitch = append(apiSwitch, time.Duration(got.SwitchMs*float64(time.Millisecond)))
		cfg, err := os.ReadFile(filepath.Join(b.dir, "model_config.json"))
		if err != nil || !strings.Contains(string(cfg), sum1) || strings.Contains(string(cfg), sum2) {
			t.Fatalf("the config after POST /v1/rollback: %s %v", cfg, err)
		}
		// Forward again for the next round.
		mark = sw.watch(2)
		putConfig(t, b, entry(sum2))
		sw.switched(g, mark)
		g.waitFor("status to show v2 serving", 10*time.Second, serving(sum2))
	}
	if n := g.metricValue("grove_model_loads_total", `{model="pctr_v1/",reason="eager",result="ok"}`) +
		g.metricValue("grove_model_loads_total", `{model="pctr_v1/",reason="update",result="ok"}`); n != loads {
		t.Errorf("going back and forth loaded %v contents", n-loads)
	}
	if n := g.metricValue("grove_model_restores_total", `{model="pctr_v1/"}`); n != 4*rounds {
		t.Errorf("grove_model_restores_total = %v, want %d", n, 4*rounds)
	}
	l.finish()
	if n := l.failed.Load(); n != 0 {
		t.Fatalf("%d of %d requests failed; first: %+v", n, n+l.ok.Load(), l.firstFailure.Load())
	}
	t.Logf("%d requests (%d by v2), none failed, no reload; poll interval 1s", l.ok.Load(), l.v2.Load())
	t.Logf("config write -> first v1 answer: %s", spread(byConfig))
	t.Logf("POST /v1/rollback -> first v1 answer: %s", spread(byAPI))
	t.Logf("POST /v1/rollback switch_ms (call to the kept content serving): %s", spread(apiSwitch))
}

// spread describes durations as min/median/max and the values.
func spread(ds []time.Duration) string {
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("min %v, median %v, max %v (n=%d: %v)", s[0], s[len(s)/2], s[len(s)-1], len(s), ds)
}
