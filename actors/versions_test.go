package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/groveml/grove/actors/lifecycle"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/modelconfig"
)

func TestServingVersionsPicksTheNewestReadyVersion(t *testing.T) {
	version := func(parent string, n int64, phase lifecycle.Phase, loaded, broken bool) *lifecycle.Path {
		p := &lifecycle.Path{Name: fmt.Sprintf("%s%d/", parent, n), Phase: phase,
			Desired: modelconfig.Model{Path: fmt.Sprintf("%s%d/", parent, n), VersionOf: parent, Version: n}}
		if loaded {
			p.Active = &lifecycle.Content{ID: n, Broken: broken}
		}
		return p
	}
	for _, tc := range []struct {
		name  string
		paths []*lifecycle.Path
		want  map[string]string
	}{
		{"highest ready, numerically", []*lifecycle.Path{version("v/", 2, lifecycle.Ready, true, false), version("v/", 10, lifecycle.Ready, true, false), version("v/", 9, lifecycle.Ready, true, false)},
			map[string]string{"v/": "v/10/"}},
		{"a loading version does not serve yet", []*lifecycle.Path{version("v/", 2, lifecycle.Ready, true, false), version("v/", 3, lifecycle.Loading, false, false)},
			map[string]string{"v/": "v/2/"}},
		{"a failed version does not serve", []*lifecycle.Path{version("v/", 2, lifecycle.Ready, true, false), version("v/", 3, lifecycle.Failed, false, false)},
			map[string]string{"v/": "v/2/"}},
		{"a version updating in place still serves", []*lifecycle.Path{version("v/", 2, lifecycle.Ready, true, false), version("v/", 3, lifecycle.Swapping, true, false)},
			map[string]string{"v/": "v/3/"}},
		{"a version leaving the policy gives way", []*lifecycle.Path{version("v/", 2, lifecycle.Ready, true, false), version("v/", 3, lifecycle.Evicting, true, false)},
			map[string]string{"v/": "v/2/"}},
		{"a broken version gives way", []*lifecycle.Path{version("v/", 2, lifecycle.Ready, true, false), version("v/", 3, lifecycle.Ready, true, true)},
			map[string]string{"v/": "v/2/"}},
		{"only leaving versions: the highest keeps serving", []*lifecycle.Path{version("v/", 2, lifecycle.Evicting, true, false), version("v/", 3, lifecycle.Evicting, true, false)},
			map[string]string{"v/": "v/3/"}},
		{"entries apart; plain paths ignored", []*lifecycle.Path{version("a/", 1, lifecycle.Ready, true, false), version("b/", 4, lifecycle.Ready, true, false),
			{Name: "c/", Phase: lifecycle.Ready, Active: &lifecycle.Content{ID: 9}, Desired: modelconfig.Model{Path: "c/"}}},
			map[string]string{"a/": "a/1/", "b/": "b/4/"}},
		{"nothing loaded", []*lifecycle.Path{version("v/", 1, lifecycle.Loading, false, false)}, map[string]string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]string{}
			for parent, p := range servingVersions(tc.paths) {
				got[parent] = p.Name
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestVersionDirsFindsNumberedDirectoriesHoldingAFile(t *testing.T) {
	for _, tc := range []struct {
		name  string
		names []string
		want  []int64
	}{
		{"numbered directories", []string{"pcvr/1/model.pt", "pcvr/10/model.pt", "pcvr/2/a/b.bin", "pcvr/2/model.pt"}, []int64{1, 2, 10}},
		{"files beside the versions are not versions", []string{"pcvr/README", "pcvr/3", "pcvr/1/model.pt"}, []int64{1}},
		{"a placeholder alone is not a version", []string{"pcvr/4/", "pcvr/5/sub/", "pcvr/1/m.pt"}, []int64{1}},
		{"a CHECKSUM alone is not a version yet", []string{"pcvr/6/CHECKSUM", "pcvr/7/CHECKSUM", "pcvr/7/m.pt", "pcvr/8/sub/CHECKSUM"}, []int64{7, 8}},
		{"names that are not version numbers", []string{"pcvr/0/m", "pcvr/-1/m", "pcvr/+2/m", "pcvr/03/m", "pcvr/v4/m", "pcvr/1e3/m", "pcvr/99999999999999999999/m", "pcvr/7/m"}, []int64{7}},
		{"other prefixes ignored", []string{"pcvr2/1/m", "pcvr/1/m"}, []int64{1}},
		{"nothing", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []bucket.Object
			for _, n := range tc.names {
				objs = append(objs, bucket.Object{Name: n, Size: 1})
			}
			if got := versionDirs("pcvr/", objs); fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("versionDirs = %v, want %v", got, tc.want)
			}
		})
	}
}

// versioned is a model config with the versioned entry v/, grace 5s.
func versioned(policy string, extra ...string) string {
	e := `{"model_path": "v/", "version_policy": ` + policy + `, "eviction_grace_period_in_ms": 5000, "warm_up_batch_request_json": "[[1]]"`
	for _, x := range extra {
		e += ", " + x
	}
	return configJSON(e + "}")
}

// answeredBy sends a request to path and returns the checksum of the content that answered.
func (w *world) answeredBy(path string) string {
	w.t.Helper()
	res := w.infer(path, 1)
	if res.Err != nil {
		w.t.Fatalf("%s: %v", path, res.Err)
	}
	return res.Checksum
}

func (w *world) versionedStatus(path string) VersionedStatus {
	w.t.Helper()
	for _, v := range w.sys.Status().Versioned {
		if v.Path == path {
			return v
		}
	}
	w.t.Fatalf("no versioned status for %s: %+v", path, w.sys.Status().Versioned)
	return VersionedStatus{}
}

func TestVersionedEntryServesItsPolicysVersionsAndFollowsANewOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, versioned(`{"latest": {"num_versions": 2}}`),
			map[string]faultySpec{"v/1/": version(1), "v/2/": version(2), "v/README": version(0)})
		defer w.stop()
		synctest.Wait()
		sum2 := checksumOf(t, "v/2/", version(2))
		if got := strings.Join(w.sys.ModelPaths(), ","); got != "v/,v/1/,v/2/" {
			t.Fatalf("ModelPaths = %s", got)
		}
		if m := w.model("v/2/"); m.State != StateReady || m.VersionOf != "v/" || m.Version != 2 {
			t.Fatalf("status of v/2/: %+v", m)
		}
		if got := w.answeredBy("v/"); got != sum2 {
			t.Fatalf("v/ answered from %s, want version 2 (%s)", got, sum2)
		}
		if p, ok := w.sys.NewestVersion("v/"); !ok || p != "v/2/" {
			t.Fatalf("NewestVersion = %q, %v", p, ok)
		}
		if res := w.infer("v/", 1); res.ModelPath != "v/" || res.ContentPath != "v/2/" {
			t.Fatalf("an answer of v/ names %q, answered by %q; want v/, v/2/", res.ModelPath, res.ContentPath)
		}
		if _, ok := w.sys.NewestVersion("v/2/"); ok {
			t.Fatal("a version's own path is not a versioned entry's")
		}
		if v := w.versionedStatus("v/"); fmt.Sprint(v.Found) != "[1 2]" || v.ServingVersion != 2 || v.ServingPath != "v/2/" || v.Policy.Latest != 2 {
			t.Fatalf("versioned status %+v", v)
		}

		// Version 3 appears; its model answers slowly, so its warm-up
		// (two requests) is seen running before it takes traffic.
		slow := version(3)
		slow.DelayMs = 400
		sum3 := w.putModel("v/3/", slow)
		time.Sleep(poll)
		synctest.Wait()
		if m := w.model("v/3/"); m.State != StateLoading {
			t.Fatalf("v/3/ while warming up: %+v", m)
		}
		if got := w.answeredBy("v/"); got != sum2 {
			t.Fatalf("v/ answered from %s while version 3 warms up, want version 2", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if m := w.model("v/3/"); m.State != StateReady || m.Version != 3 {
			t.Fatalf("v/3/ after its warm-up: %+v", m)
		}
		if got := w.answeredBy("v/"); got != sum3 {
			t.Fatalf("v/ answered from %s, want version 3 (%s)", got, sum3)
		}
		if got := w.answeredBy("v/2/"); got != sum2 {
			t.Fatalf("v/2/ answered from %s", got)
		}
		// Version 1 left the policy (latest 2): it serves for its grace period, then is gone.
		if m := w.model("v/1/"); m.State != StateEvicting {
			t.Fatalf("v/1/ out of the policy: %+v", m)
		}
		if res := w.infer("v/1/", 1); res.Err != nil {
			t.Fatalf("v/1/ during its grace period: %v", res.Err)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if res := w.infer("v/1/", 1); !errors.Is(res.Err, ErrModelNotFound) {
			t.Fatalf("v/1/ after its grace period: %v", res.Err)
		}
		if got := strings.Join(w.sys.ModelPaths(), ","); got != "v/,v/2/,v/3/" {
			t.Fatalf("ModelPaths = %s", got)
		}
		fams, err := w.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		gauged := map[string]bool{}
		for _, f := range fams {
			if f.GetName() == "grove_model_inflight" {
				for _, m := range f.GetMetric() {
					gauged[m.GetLabel()[0].GetValue()] = true
				}
			}
		}
		if fmt.Sprint(gauged) != "map[v/2/:true v/3/:true]" {
			t.Errorf("grove_model_inflight for %v, want each version once and not the entry's path", gauged)
		}
	})
}

func TestVersionLeavingThePolicyStopsServingTheEntryAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, versioned(`{"all": {}}`), map[string]faultySpec{"v/1/": version(1), "v/2/": version(2), "v/3/": version(3)})
		defer w.stop()
		synctest.Wait()
		if got, want := w.answeredBy("v/"), checksumOf(t, "v/3/", version(3)); got != want {
			t.Fatalf("v/ answered from %s, want version 3", got)
		}
		// Pinned back to 1 and 2: the entry serves 2 now, 3 still answers
		// by its own path until its grace period ends.
		w.setConfig(versioned(`{"specific": {"versions": [2, 1]}}`))
		if got, want := w.answeredBy("v/"), checksumOf(t, "v/2/", version(2)); got != want {
			t.Fatalf("v/ answered from %s after the pin, want version 2", got)
		}
		if m := w.model("v/3/"); m.State != StateEvicting {
			t.Fatalf("v/3/: %+v", m)
		}
		w.answeredBy("v/3/")
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if res := w.infer("v/3/", 1); !errors.Is(res.Err, ErrModelNotFound) {
			t.Fatalf("v/3/ after its grace period: %v", res.Err)
		}
		// The entry removed: its versions serve, and so does its path,
		// for their grace period.
		w.setConfig(configJSON())
		if got, want := w.answeredBy("v/"), checksumOf(t, "v/2/", version(2)); got != want {
			t.Fatalf("v/ answered from %s during the grace period, want version 2", got)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if res := w.infer("v/", 1); !errors.Is(res.Err, ErrModelNotFound) {
			t.Fatalf("v/ after the grace period: %v", res.Err)
		}
		if st := w.sys.Status(); len(st.Models) != 0 || len(st.Versioned) != 0 {
			t.Fatalf("status %+v", st)
		}
	})
}

func TestFailingVersionIsRetriedWhileTheOthersServe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, versioned(`{"latest": {"num_versions": 3}}`), map[string]faultySpec{"v/1/": version(1), "v/2/": version(2)})
		defer w.stop()
		synctest.Wait()
		sum2 := checksumOf(t, "v/2/", version(2))
		w.putModel("v/3/", faultySpec{FailLoad: true})
		w.settle()
		if m := w.model("v/3/"); m.State != StateFailed || m.LastError == "" {
			t.Fatalf("v/3/: %+v", m)
		}
		if got := w.answeredBy("v/"); got != sum2 {
			t.Fatalf("v/ answered from %s with version 3 failed, want version 2", got)
		}
		w.settle()
		if n := w.metric("grove_model_loads_total", map[string]string{"model": "v/3/", "result": "failed"}); n < 2 {
			t.Fatalf("version 3 tried %v times, want a retry on each poll", n)
		}
		sum3 := w.putModel("v/3/", version(3))
		w.settle()
		if got := w.answeredBy("v/"); got != sum3 {
			t.Fatalf("v/ answered from %s once version 3 is fixed, want %s", got, sum3)
		}
		if m := w.model("v/3/"); m.State != StateReady || m.LastError != "" {
			t.Fatalf("v/3/: %+v", m)
		}
	})
}

func TestVersionChecksumsAndChecksumFilesVerifyAVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sum1 := checksumOf(t, "v/1/", version(1))
		w := newWorld(t, versioned(`{"all": {}}`, `"version_checksums": {"1": "`+sum1+`"}`), map[string]faultySpec{"v/1/": version(1)})
		defer w.stop()
		synctest.Wait()
		if m := w.model("v/1/"); m.State != StateReady || m.ConfiguredChecksum != sum1 {
			t.Fatalf("v/1/: %+v", m)
		}
		// A CHECKSUM file that does not match fails version 2, which is
		// retried on later polls; v/ keeps serving version 1.
		sum2 := w.putModel("v/2/", version(2))
		w.b.set("v/2/"+bucket.ChecksumFile, []byte(strings.Repeat("0", 64)+"\n"))
		w.settle()
		if m := w.model("v/2/"); m.State != StateFailed || !strings.Contains(m.LastError, "v/2/CHECKSUM holds "+strings.Repeat("0", 64)) {
			t.Fatalf("v/2/ with a wrong CHECKSUM: %+v", m)
		}
		if got := w.answeredBy("v/"); got != sum1 {
			t.Fatalf("v/ answered from %s", got)
		}
		w.b.set("v/2/"+bucket.ChecksumFile, []byte(sum2+"\n"))
		w.settle()
		if m := w.model("v/2/"); m.State != StateReady || m.Checksum != sum2 {
			t.Fatalf("v/2/ with its CHECKSUM right: %+v", m)
		}
		// version_checksums and CHECKSUM must both hold.
		w.setConfig(versioned(`{"all": {}}`, `"version_checksums": {"1": "`+sum1+`", "2": "`+sum1+`"}`))
		if m := w.model("v/2/"); !strings.Contains(m.LastError, "incorrect checksum: expected "+sum1+", actual "+sum2) {
			t.Fatalf("v/2/ against version_checksums: %+v", m)
		}
		if got := w.answeredBy("v/2/"); got != sum2 {
			t.Fatalf("the serving content of v/2/ stays while the update fails: %s", got)
		}
	})
}

// listFailing is a memBucket whose listings fail while fail is set.
type listFailing struct {
	*memBucket
	mu   sync.Mutex
	fail error
}

func (b *listFailing) List(ctx context.Context, prefix string) ([]bucket.Object, error) {
	b.mu.Lock()
	err := b.fail
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return b.memBucket.List(ctx, prefix)
}

func (b *listFailing) setFail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.fail = err
}

func TestVersionListingErrorKeepsTheVersionsFoundBefore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var lb *listFailing
		w := newWorld(t, versioned(`{"latest": {"num_versions": 2}}`), map[string]faultySpec{"v/1/": version(1), "v/2/": version(2)},
			func(w *world, o *Options) {
				lb = &listFailing{memBucket: w.b}
				o.Bucket = lb
			})
		defer w.stop()
		synctest.Wait()
		lb.setFail(errors.New("listing denied"))
		w.putModel("v/3/", version(3))
		w.settle()
		for _, p := range []string{"v/1/", "v/2/"} {
			if m := w.model(p); m.State != StateReady {
				t.Fatalf("%s after a failed listing: %+v", p, m)
			}
		}
		v := w.versionedStatus("v/")
		if fmt.Sprint(v.Found) != "[1 2]" || !strings.Contains(v.ListError, "listing the versions of v/ in mem://test: listing denied") || v.ListErrorAt == nil || v.ServingVersion != 2 {
			t.Fatalf("versioned status %+v", v)
		}
		if !strings.Contains(w.log.String(), "versioned model not listed") {
			t.Error("the failed listing is not logged")
		}
		lb.setFail(nil)
		w.settle()
		if v := w.versionedStatus("v/"); fmt.Sprint(v.Found) != "[1 2 3]" || v.ListError != "" || v.ServingVersion != 3 {
			t.Fatalf("versioned status once listed again %+v", v)
		}
	})
}

// A versioned entry's path is the config's: a registration may not take
// it, and the entry takes it from a registration made before.
func TestVersionedEntryPathIsNotARegistrations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": version(1), "v/1/": version(1)})
		defer w.stop()
		synctest.Wait()
		ctx := context.Background()
		name, data := modelFile(t, "v/", version(9))
		if err := w.sys.RegisterModel(ctx, "v/", map[string][]byte{name: data}, ""); err != nil {
			t.Fatal(err)
		}
		sum9 := checksumOf(t, "v/", version(9))
		if got := w.answeredBy("v/"); got != sum9 {
			t.Fatalf("v/ answered from %s, want the registration", got)
		}
		sum1 := checksumOf(t, "v/1/", version(1))
		w.setConfig(configJSON(entry("a/", "", ""), `{"model_path": "v/", "version_policy": {"all": {}}}`))
		synctest.Wait()
		if got := w.answeredBy("v/"); got != sum1 {
			t.Fatalf("v/ answered from %s once the config lists it as a versioned entry, want version 1 (%s)", got, sum1)
		}
		for _, m := range w.sys.Status().Models {
			if m.Path == "v/" {
				t.Fatalf("the registration of v/ is still there: %+v", m)
			}
		}
		if err := w.sys.RegisterModel(ctx, "v/", map[string][]byte{name: data}, ""); !errors.Is(err, ErrManagedByConfig) {
			t.Fatalf("registering a versioned entry's path: %v", err)
		}
		if got := w.answeredBy("v/"); got != sum1 {
			t.Fatalf("v/ answered from %s after the refused registration", got)
		}
	})
}

// With latest 1, a new version that fails does not take the entry's
// service away: the version it would replace serves on past its grace
// period until a version of the policy is ready (as TF Serving's
// availability-preserving policy), and leaves once one is.
func TestFailingNewestVersionDoesNotUnloadTheOneServing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, versioned(`{"latest": {"num_versions": 1}}`), map[string]faultySpec{"v/1/": version(1)})
		defer w.stop()
		synctest.Wait()
		sum1 := checksumOf(t, "v/1/", version(1))
		w.putModel("v/2/", faultySpec{FailLoad: true})
		w.settle()
		time.Sleep(10 * time.Second) // twice the grace period
		synctest.Wait()
		if m := w.model("v/2/"); m.State != StateFailed {
			t.Fatalf("v/2/: %+v", m)
		}
		if got := w.answeredBy("v/"); got != sum1 {
			t.Fatalf("v/ answered from %s with version 2 failed, want version 1", got)
		}
		if m := w.model("v/1/"); m.State != StateReady {
			t.Fatalf("v/1/ while version 2 fails: %+v", m)
		}
		sum2 := w.putModel("v/2/", version(2))
		w.settle()
		if got := w.answeredBy("v/"); got != sum2 {
			t.Fatalf("v/ answered from %s once version 2 is fixed, want %s", got, sum2)
		}
		w.settle()
		if m := w.model("v/1/"); m.State != StateEvicting {
			t.Fatalf("v/1/ once version 2 serves: %+v", m)
		}
	})
}

func TestContractRoutesBetweenVersionsOfAVersionedEntry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := `{"model_metadata": [{"model_path": "v/", "version_policy": {"all": {}}}],
		 "contracts": [{"organization": "ads", "project": "pcvr", "contract_number": 1, "servables": [
		   {"release_version": "r1", "model_path": "v/1/"},
		   {"release_version": "r2", "model_path": "v/2/", "validity": [{"never_valid": {}}], "shadow": {}}]}]}`
		w := newWorld(t, cfg, map[string]faultySpec{"v/1/": version(1), "v/2/": version(2)})
		defer w.stop()
		synctest.Wait()
		sum1 := checksumOf(t, "v/1/", version(1))
		for range 5 {
			res, rv, err := w.sys.Score(context.Background(), "ads/pcvr/1", "", Request{API: "test", Inputs: scalar(t, 1)})
			if err != nil || res.Err != nil || rv != "r1" || res.Checksum != sum1 || res.ModelPath != "v/1/" {
				t.Fatalf("score: %+v %q %v", res, rv, err)
			}
		}
		synctest.Wait()
		stats, err := w.sys.ContractStats("ads/pcvr/1")
		if err != nil {
			t.Fatal(err)
		}
		// Every request was copied to r2 (a copy finding the shadow worker
		// busy is dropped and counted).
		if s := stats[1]; s.Release != "r2" || !s.Ready || s.ShadowExecutions < 1 || s.ShadowExecutions+s.ShadowDropped != 5 {
			t.Fatalf("the version shadowing: %+v", s)
		}
	})
}

// A model's path turned into a versioned entry (the processor's model
// directory gaining its first version): the model serves the path while
// the first version warms up, and the version serves it as soon as it is
// ready, not only once the model's grace period is over.
func TestModelTurnedVersionedEntryHandsOverWhenTheVersionIsReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("v/", "", `"eviction_grace_period_in_ms": 60000`)), map[string]faultySpec{"v/": version(7)})
		defer w.stop()
		synctest.Wait()
		sum0 := checksumOf(t, "v/", version(7))
		if got := w.answeredBy("v/"); got != sum0 {
			t.Fatalf("v/ answered from %s, want the model (%s)", got, sum0)
		}
		slow := version(1)
		slow.DelayMs = 400
		sum1 := w.putModel("v/1/", slow)
		w.setConfig(versioned(`{"latest": {"num_versions": 1}}`))
		if m := w.model("v/1/"); m.State != StateLoading {
			t.Fatalf("v/1/ while warming up: %+v", m)
		}
		if got := w.answeredBy("v/"); got != sum0 {
			t.Fatalf("v/ answered from %s while version 1 warms up, want the model", got)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if m := w.model("v/1/"); m.State != StateReady {
			t.Fatalf("v/1/ after its warm-up: %+v", m)
		}
		if got := w.answeredBy("v/"); got != sum1 {
			t.Fatalf("v/ answered from %s with version 1 ready, want version 1 (%s), not the model in its grace period", got, sum1)
		}
		if m := w.model("v/"); m.State != StateEvicting {
			t.Fatalf("the model of v/ after the hand-over: %+v", m)
		}
	})
}
