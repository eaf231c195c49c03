package it

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"google.golang.org/protobuf/proto"

	"github.com/groveml/grove/grovepb"
	"github.com/groveml/grove/logging"
	"github.com/groveml/grove/logging/outcome/evaluations"
	"github.com/groveml/grove/logging/outcome/join"
	"github.com/groveml/grove/routing/quality"
)

// The synthetic ad stream's outcome rule: a 2 s click window, 5 s of
// lateness (more than the outcome sender's ticks; an evaluator's restart
// holds the watermark by its frontier instead).
const (
	evalWindow   = 2 * time.Second
	evalContract = "ads/out/1"
	evalTopic    = "grove.evaluations"
	outcomeTopic = "grove.outcomes"
)

// evalModelConfig: the calibrated but coarse champion v1, the true model
// v2 and the 1.5× too high v3, both in shadow with the same outcome gate.
const evalModelConfig = `{"model_metadata": [{"model_path": "coarse/"}, {"model_path": "truth/"}, {"model_path": "high/"}],
 "contracts": [{"organization": "ads", "project": "out", "contract_number": 1,
   "outcomes": {"label": "click", "kind": "binary", "window": "2s", "lateness": "5s", "output": "output_0"},
   "servables": [
     {"release_version": "v1", "model_path": "coarse/", "logging": {"log_level": "FULL"}},
     {"release_version": "v2", "model_path": "truth/", "shadow": {"sample_rate": 1.0}, "logging": {"log_level": "FULL"},
      "validity": [{"promote_when": {"min_outcomes": 300, "max_logloss_delta": 0, "logloss_confidence": 0.95, "calibration_between": [0.8, 1.25]}}]},
     {"release_version": "v3", "model_path": "high/", "shadow": {"sample_rate": 1.0}, "logging": {"log_level": "FULL"},
      "validity": [{"promote_when": {"min_outcomes": 300, "max_logloss_delta": 0, "logloss_confidence": 0.95, "calibration_between": [0.8, 1.25]}}]}]}]}`

// evaluator is a grove evaluate process.
type evaluator struct {
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan struct{} // closed once it has exited
}

// startEvaluator starts grove evaluate with args.
func startEvaluator(t *testing.T, args ...string) *evaluator {
	t.Helper()
	cmd := exec.Command(groveBin, append([]string{"evaluate", "--log-level", "debug"}, args...)...)
	e := &evaluator{cmd: cmd, logs: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = e.logs, e.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(e.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-e.done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-e.done
		}
		if t.Failed() {
			t.Logf("grove evaluate logs:\n%s", e.logs.String())
		}
	})
	return e
}

// clickOutcome is one outcome the test reports, and when.
type clickOutcome struct {
	at  time.Time
	doc map[string]any
}

// TestOutcomesJudgeShadowsLiveAndSurviveAKilledEvaluator drives a
// synthetic ad stream whose true click probability is known through the
// real binaries: grove serve --evaluate (one evaluator in-process) and a
// second evaluator, grove evaluate, sharing the 4 partitions, killed
// with SIGKILL mid-stream and started again. Clicks are drawn from the
// true probability and reported at their time through POST /v1/outcomes,
// most within the window, one in ten up to 0.3 windows after it, some twice. The evaluations
// topic's totals then equal an offline computation over the prediction
// log and the outcomes sent (counts exactly, log loss to 1e-6, AUC to
// 0.001); grove serve, reading them back, promotes the better challenger
// by its outcome gate and never the miscalibrated one. Each shadow event
// carries its request's request_timestamp, its window's start; the
// stream waits while the shadow copies are more than 20 requests behind
// (the shadow workers, at nice 19, fall behind on a busy machine, and a
// copy run later than the window and the lateness would be a late
// prediction).
// Budget: 30 s.
func TestOutcomesJudgeShadowsLiveAndSurviveAKilledEvaluator(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, logTopic, outcomeTopic), kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(4), kfake.ListenFn(loopbackListen))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	broker := c.ListenAddrs()[0]

	b := newDirBucket(t)
	for _, m := range []string{"truth", "coarse", "high"} {
		data, err := os.ReadFile(filepath.Join(repoRoot(), "it", "testdata", "outcomes", m+".pt"))
		if err != nil {
			t.Fatal(err)
		}
		b.Put(t, m+"/model.pt", data)
	}
	b.Put(t, "model_config.json", []byte(evalModelConfig))
	yaml := fmt.Sprintf("kafka:\n  brokers: [%q]\n  topic: %s\n  linger: 1ms\nprediction_log:\n  default_level: FULL\n  key_by: request_id\n"+
		"outcomes:\n  commit_interval: 200ms\n", broker, logTopic)
	cfgArgs := writeServerConfig(t, yaml)
	// Every shadow copy waits for the niced shadow worker rather than
	// being shed, however busy the machine.
	g := startGrove(t, b.URL(), nil, append(cfgArgs, "--evaluate", "--shadow-timeout", "2m", "--shadow-queue", "100000")...)
	evalDir := t.TempDir()
	evalArgs := append([]string{"--bucket", b.URL(), "--evaluate-state-dir", evalDir, "--poll-interval", "1s", "--cache-dir", t.TempDir()}, cfgArgs...)
	ev := startEvaluator(t, evalArgs...)

	// The stream: one impression per request, x0 uniform in [-2, 1] and
	// x1 ±1; the true click probability sigmoid(x0 + 1.2 x1 - 1).
	rng := rand.New(rand.NewPCG(28, 1))
	const requests = 700
	var mu sync.Mutex
	var pending []clickOutcome
	sent := map[string]time.Time{} // outcome_id → event time, of those reported
	twice := 0
	sendCtx, stopSending := context.WithCancel(context.Background())
	defer stopSending()
	senderDone := make(chan struct{})
	var finishing bool
	go func() {
		defer close(senderDone)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-sendCtx.Done():
				return
			case <-tick.C:
			}
			mu.Lock()
			now := time.Now()
			var due []map[string]any
			rest := pending[:0]
			for _, o := range pending {
				if !o.at.After(now) {
					due = append(due, o.doc)
				} else {
					rest = append(rest, o)
				}
			}
			pending = rest
			last := finishing && len(pending) == 0
			mu.Unlock()
			if len(due) > 0 {
				body, _ := json.Marshal(due)
				resp, err := client.Post(g.url+"/v1/outcomes", "application/json", bytes.NewReader(body))
				if err != nil {
					t.Errorf("posting outcomes: %v", err)
					return
				}
				var ans struct {
					Accepted int `json:"accepted"`
				}
				_ = json.NewDecoder(resp.Body).Decode(&ans)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || ans.Accepted != len(due) {
					t.Errorf("POST /v1/outcomes: HTTP %d, %d of %d accepted", resp.StatusCode, ans.Accepted, len(due))
				}
			}
			if last {
				return
			}
		}
	}()

	// The shadow copies' backlog stays under shadowBacklog requests' worth:
	// a copy that ran after its request's window and the lateness (7 s)
	// is a late prediction, not scored, and the shadow workers (at nice
	// 19) can lag that far on a machine busy with other tests. The stream
	// waits until a copy of a request at most shadowBacklog back has been
	// logged (they run in order), or, should those all have been dropped
	// unrun (the model's queue held its share of shadow work: then in
	// neither the log nor the join), until two copies per request up to
	// there were logged or dropped.
	const shadowBacklog = 20
	shadows := watchShadowEvents(t, broker, logTopic, evalContract)
	sentAt := make([]time.Time, requests)
	for i := range requests {
		if i%10 == 0 && i >= shadowBacklog {
			deadline := time.Now().Add(time.Minute)
			for !shadows.caughtUp(sentAt[i-shadowBacklog]) {
				done := float64(shadows.n.Load()) + g.metricSum("grove_shadow_dropped_total", "")
				if done >= float64(2*(i-shadowBacklog)) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("request %d: no shadow copy of request %d or later logged within a minute (%v logged or dropped)", i, i-shadowBacklog, done)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
		sentAt[i] = time.Now()
		if i == requests*2/5 {
			// SIGKILL the second evaluator mid-stream, and start it again
			// on the same state directory.
			if err := ev.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-ev.done
			ev = startEvaluator(t, evalArgs...)
		}
		x0, x1 := -2+3*rng.Float64(), float64(2*rng.IntN(2)-1)
		p := 1 / (1 + math.Exp(-(x0 + 1.2*x1 - 1)))
		req := fmt.Sprintf("imp-%d", i)
		body := fmt.Sprintf(`{"schema":[{"type":"Float32","fields":["x0","x1"]}],"datum":[{"tensors":[{"Float32":{"data":[%v,%v]}}]}]}`, float32(x0), x1)
		r, err := http.NewRequest(http.MethodPost, g.url+"/ads/out/1/score", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("X-Request-Id", req)
		resp, err := client.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("score %d: HTTP %d", i, resp.StatusCode)
		}
		answered := time.Now()
		if rng.Float64() < p {
			// Most clicks within the window, one in ten up to 0.3 windows after.
			delay := time.Duration(rng.Float64() * float64(evalWindow))
			if rng.Float64() < 0.1 {
				delay = evalWindow + time.Duration(rng.Float64()*0.3*float64(evalWindow))
			}
			at := answered.Add(delay)
			doc := map[string]any{"outcome_id": req + "/click", "request_id": req, "event_time": at.UTC().Format(time.RFC3339Nano),
				"labels": map[string]float64{"click": 1}}
			mu.Lock()
			pending = append(pending, clickOutcome{at: at, doc: doc})
			if rng.Float64() < 0.1 { // reported twice
				pending = append(pending, clickOutcome{at: at.Add(30 * time.Millisecond), doc: doc})
				twice++
			}
			sent[req+"/click"] = at
			mu.Unlock()
		}
		time.Sleep(4 * time.Millisecond)
	}
	mu.Lock()
	finishing = true
	mu.Unlock()
	select {
	case <-senderDone:
	case <-time.After(15 * time.Second):
		t.Fatal("the outcomes were not all sent")
	}

	// The offline computation over the prediction log: each logged row of
	// the contract, its value and its served request's window.
	events := consumeAll(t, broker, logTopic, 15*time.Second)
	type row struct {
		release string
		shadow  bool
		p       float64
		clicked bool
	}
	servedAt := map[string]time.Time{}
	var logged []*grovepb.PredictionEvent
	for _, ev := range events {
		if ev.GetContract() != evalContract {
			continue
		}
		logged = append(logged, ev)
		if ev.GetServed() {
			servedAt[ev.GetRequestId()] = ev.GetRequestTimestamp().AsTime()
		}
	}
	// Every event's window starts at its request's time, which its
	// shadows carry too, however late they ran.
	var rows []row
	var lag time.Duration // the longest a shadow ran after its request
	for _, ev := range logged {
		start, ok := servedAt[ev.GetRequestId()]
		if !ok {
			t.Fatalf("shadow event of %s without its served event", ev.GetRequestId())
		}
		if !ev.GetRequestTimestamp().AsTime().Equal(start) {
			t.Fatalf("%s %s: request_timestamp %v, its served event's %v", ev.GetRequestId(), ev.GetReleaseVersion(),
				ev.GetRequestTimestamp().AsTime(), start)
		}
		if !ev.GetServed() {
			lag = max(lag, ev.GetTimestamp().AsTime().Sub(start))
		}
		at, clicked := sent[ev.GetRequestId()+"/click"]
		clicked = clicked && !at.Before(start) && !at.After(start.Add(evalWindow))
		rows = append(rows, row{release: ev.GetReleaseVersion(), shadow: !ev.GetServed(), p: float64(ev.GetOutputs()[0].GetFloatData()[0]), clicked: clicked})
	}
	offline := map[string]*quality.Binary{}
	for _, r := range rows {
		if offline[r.release] == nil {
			offline[r.release] = &quality.Binary{}
		}
		offline[r.release].Add(r.p, r.clicked)
	}
	served := 0
	for _, r := range rows {
		if !r.shadow {
			served++
		}
	}
	if len(offline) != 3 || offline["v2"].Count() < requests/2 || served != requests {
		t.Fatalf("logged rows per release: v1 %d, v2 %d, v3 %d, %d served (of %d requests)", offline["v1"].Count(), offline["v2"].Count(),
			offline["v3"].Count(), served, requests)
	}

	// The evaluators' results, once every logged row is scored.
	late := 0 // clicks after their impression's window
	for id, at := range sent {
		if at.After(servedAt[strings.TrimSuffix(id, "/click")].Add(evalWindow)) {
			late++
		}
	}
	latest := readEvaluations(t, broker, 40*time.Second, uint64(len(rows)))
	counters, series := mergeEvaluations(t, latest)
	if counters.Scored != uint64(len(rows)) || counters.Outcomes != uint64(len(sent)-late) || counters.Late != uint64(late) ||
		counters.DuplicateOutcomes != uint64(twice) || counters.Unmatched != 0 || counters.Invalid != 0 || counters.DuplicatePredictions != 0 {
		t.Errorf("counters %+v: want %d scored, %d outcomes, %d late, %d duplicates and nothing unmatched or invalid", counters, len(rows), len(sent)-late, late, twice)
	}
	for rv, want := range offline {
		got := series[rv]
		if got == nil {
			t.Errorf("%s: no evaluation", rv)
			continue
		}
		g := got.SinceValid()
		if g.Count() != want.Count() || g.Positives() != want.Positives() || math.Abs(g.LogLoss()-want.LogLoss()) > 1e-6 ||
			math.Abs(g.MeanPrediction()-want.MeanPrediction()) > 1e-6 || math.Abs(g.AUC()-want.AUC()) > 0.001 {
			t.Errorf("%s: count %d positives %d mean %.6f logloss %.6f auc %.4f; offline %d %d %.6f %.6f %.4f", rv,
				g.Count(), g.Positives(), g.MeanPrediction(), g.LogLoss(), g.AUC(),
				want.Count(), want.Positives(), want.MeanPrediction(), want.LogLoss(), want.AUC())
		}
	}
	// grove serve reads the results: v2, better than the champion on the
	// same impressions and calibrated, is promoted by its outcome gate;
	// v3, 1.5× too high, waits on its calibration; v3's figures in the
	// stats are the offline ones.
	g.waitFor("v2 promoted by its outcomes", 20*time.Second, func() bool {
		gs := g.gates(evalContract)["v2"]
		return gs.Valid && gs.Gate != nil && gs.Gate.State == "promoted"
	})
	if v := g.gates(evalContract)["v3"]; v.Valid || v.Gate == nil || v.Gate.State != "waiting" || !strings.Contains(v.Gate.Detail, "calibration") {
		t.Errorf("v3, 1.5× too high: %+v %+v; want it waiting on its calibration", v, v.Gate)
	}
	g.waitFor("v3's figures in the stats", 10*time.Second, func() bool {
		o := g.outcomesOf(evalContract)["v3"]
		return o != nil && o.SinceValid.Count == offline["v3"].Count()
	})
	if o, w := g.outcomesOf(evalContract)["v3"], offline["v3"]; o.SinceValid.BinaryFigures == nil || o.SinceValid.Positives != w.Positives() ||
		math.Abs(*o.SinceValid.LogLoss-w.LogLoss()) > 1e-6 || math.Abs(*o.SinceValid.Calibration-w.Calibration()) > 1e-6 ||
		math.Abs(*o.SinceValid.AUC-w.AUC()) > 0.001 || o.VsChampion == nil || o.VsChampion.Method != "paired" {
		t.Errorf("v3 in the stats: %+v %+v, offline count %d positives %d logloss %v calibration %v auc %v", o.SinceValid.BinaryFigures, o.VsChampion,
			w.Count(), w.Positives(), w.LogLoss(), w.Calibration(), w.AUC())
	}
	t.Logf("a shadow ran up to %v after its request", lag.Round(time.Millisecond))
	t.Logf("%d requests, %d rows scored; offline v1 logloss %.4f auc %.3f calibration %.3f, v2 %.4f %.3f %.3f, v3 %.4f %.3f %.3f", requests, len(rows),
		offline["v1"].LogLoss(), offline["v1"].AUC(), offline["v1"].Calibration(), offline["v2"].LogLoss(), offline["v2"].AUC(), offline["v2"].Calibration(),
		offline["v3"].LogLoss(), offline["v3"].AUC(), offline["v3"].Calibration())
}

// loopbackListen listens on a free loopback port.
func loopbackListen(network, _ string) (net.Listener, error) {
	return net.Listen(network, "127.0.0.1:0")
}

// shadowWatch follows the shadow events of a contract on the prediction
// log.
type shadowWatch struct {
	n      atomic.Int64 // shadow events seen
	newest atomic.Int64 // the latest request_timestamp among them, Unix ns
}

// caughtUp reports whether a shadow event of a request taken in at or
// after t has been seen.
func (w *shadowWatch) caughtUp(t time.Time) bool { return w.newest.Load() >= t.UnixNano() }

// watchShadowEvents follows, until the test ends, the shadow events of
// contract on topic (from its start).
func watchShadowEvents(t *testing.T, broker, topic, contract string) *shadowWatch {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done; cl.Close() })
	w := &shadowWatch{}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) {
				ev, err := logging.Decode(r.Value, r.Headers)
				if err != nil || ev.GetContract() != contract || ev.GetServed() {
					return
				}
				w.n.Add(1)
				if at := ev.GetRequestTimestamp().AsTime().UnixNano(); at > w.newest.Load() {
					w.newest.Store(at)
				}
			})
		}
	}()
	return w
}

// consumeAll reads every prediction event of topic until nothing new
// comes for a second (within timeout).
func consumeAll(t *testing.T, broker, topic string, timeout time.Duration) []*grovepb.PredictionEvent {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	deadline := time.Now().Add(timeout)
	var out []*grovepb.PredictionEvent
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		recs := fs.Records()
		if len(recs) == 0 && len(out) > 0 {
			return out
		}
		for _, r := range recs {
			ev, err := logging.Decode(r.Value, r.Headers)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, ev)
		}
	}
	t.Fatalf("the prediction log did not end within %v", timeout)
	return nil
}

// readEvaluations reads the evaluations topic (read_committed) until the
// partitions' counters say scored rows were scored.
func readEvaluations(t *testing.T, broker string, timeout time.Duration, scored uint64) map[string]*grovepb.Evaluation {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.ConsumeTopics(evalTopic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	latest := map[string]*grovepb.Evaluation{}
	for {
		var n uint64
		for _, ev := range latest {
			n += ev.GetCounters().GetScored()
		}
		if n >= scored {
			return latest
		}
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("evaluations within %v: %d of %d rows scored", timeout, n, scored)
		}
		for _, r := range fs.Records() {
			ev := &grovepb.Evaluation{}
			if err := proto.Unmarshal(r.Value, ev); err != nil {
				t.Fatal(err)
			}
			latest[string(r.Key)] = ev
		}
	}
}

// mergeEvaluations returns the partitions' counters added up, as grove
// serve's evaluations.Table adds them, and merges each release's windows
// (served and shadow alike: v2 serves once promoted, so its predictions
// are in both series).
func mergeEvaluations(t *testing.T, latest map[string]*grovepb.Evaluation) (join.Counters, map[string]*quality.OutcomeWindows[quality.Binary, *quality.Binary]) {
	t.Helper()
	tb := evaluations.NewTable()
	series := map[string]*quality.OutcomeWindows[quality.Binary, *quality.Binary]{}
	for k, ev := range latest {
		v, err := proto.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if err := tb.Apply([]byte(k), v); err != nil {
			t.Fatal(err)
		}
		if ev.GetCounters() != nil {
			continue
		}
		w := &quality.OutcomeWindows[quality.Binary, *quality.Binary]{}
		if err := w.UnmarshalBinary(ev.GetBinary()); err != nil {
			t.Fatal(err)
		}
		if s := series[ev.GetRelease()]; s != nil {
			s.Merge(w)
		} else {
			series[ev.GetRelease()] = w
		}
	}
	tb.Publish()
	return tb.Totals().Counters, series
}
