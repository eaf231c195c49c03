package forestflow

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/routing/quality"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/faulty"
	"github.com/groveml/grove/transport/httpserver"
)

// The shadow comparison reads the very output tensors the caller got,
// after the handler has encoded them into a pooled buffer and given its
// request and response buffers back for other requests. Concurrent score
// calls through the real handler (run this with -race) prove that it
// never reads memory handed back to a pool: a comparison that did would
// be a data race with the next request's use of the buffer, and would
// see other requests' values (a difference other than the challenger's
// shift of 0.25).
func TestShadowComparisonReadsNoPooledMemory(t *testing.T) {
	b := bucket.NewMemory("compare", map[string][]byte{
		"a/model.faulty": []byte(`{"by_position": true}`),
		"b/model.faulty": []byte(`{"by_position": true, "add": 0.25}`),
		"model_config.json": []byte(`{"model_metadata": [{"model_path": "a/"}, {"model_path": "b/"}],
 "contracts": [{"organization": "ads", "project": "p", "contract_number": 1, "servables": [
   {"release_version": "v1", "model_path": "a/"},
   {"release_version": "v2", "model_path": "b/", "validity": [{"never_valid": {}}], "shadow": {}}]}]}`),
	})
	sys, err := actors.Start(actors.Options{Bucket: b, ModelConfigPath: "model_config.json", PollInterval: time.Hour,
		CacheDir: t.TempDir(), QueueSize: 1024, MaxBatchRows: 16, ShadowWorkers: 2, ShadowQueue: 1024,
		Runtimes: servables.Registry{faulty.Runtime{}}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sys.Stop(context.Background()) })
	for deadline := time.Now().Add(time.Minute); !sys.Ready(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("actor system not ready")
		}
	}
	h := httpserver.New(httpserver.Options{})
	Register(h, sys)
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(srv.Close)

	const callers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, callers*each)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				v := float64(c*each + i) // every request its own values
				body := fmt.Sprintf(`{"schema":[{"type":"Float64","fields":["f","g"]}],"datum":[{"tensors":[{"Float64":{"data":[%v,%v]}}]},{"tensors":[{"Float64":{"data":[%v,%v]}}]}]}`, v, v+0.5, -v, v/7)
				resp, err := srv.Client().Post(srv.URL+"/ads/p/1/score", "application/json", strings.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				raw, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					errs <- fmt.Errorf("score %v: HTTP %d %s", v, resp.StatusCode, raw)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	type stats []struct {
		Grove struct {
			Release    string                   `json:"release_version"`
			Comparison *quality.ComparisonStats `json:"comparison"`
		}
	}
	var cmp *quality.ComparisonStats
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		resp, err := srv.Client().Get(srv.URL + "/ads/p/1/stats")
		if err != nil {
			t.Fatal(err)
		}
		var st stats
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil || len(st) != 2 || st[0].Grove.Comparison != nil || st[1].Grove.Comparison == nil {
			t.Fatalf("stats: %v %+v", err, st)
		}
		if cmp = st[1].Grove.Comparison; cmp.SinceStart.Executions == callers*each {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s, %d of %d shadow executions compared", cmp.SinceStart.Executions, callers*each)
		}
	}
	s := cmp.SinceStart
	if s.Errors != 0 || s.ChampionFailed != 0 || s.Mismatches != 0 || len(s.Outputs) != 1 || s.Outputs[0].Rows != 2*callers*each {
		t.Fatalf("since start %+v", s)
	}
	if math.Abs(s.MeanAbsDiff-0.25) > 1e-9 || math.Abs(s.MaxAbsDiff-0.25) > 1e-9 || s.WithinTolerance != 0 {
		t.Errorf("mean %v max %v within %v: want exactly the challenger's shift, 0.25", s.MeanAbsDiff, s.MaxAbsDiff, s.WithinTolerance)
	}
}
