package main

// The shadow scenario measures the requirement "under a saturating shadow
// load, user-request p99 stays within 1.5x of the no-shadow p99" on one
// model actor: the user stream and the shadow copies land on the same
// content (pctr_v1/), so what protects the user requests is the priority
// mailbox (user 6, shadow 1) and the micro-batching of shadow copies.
//
// One grove process serves a bucket with three contracts; the first two
// are the measurement:
//
//   - ads/pctr/1: champion pctr_v1/ (immediately valid), no shadows. The
//     measured user stream: POST /ads/pctr/1/score, ForestFlow BASIC JSON,
//     batch 1, a few closed-loop clients.
//   - ads/pctr/2: two champions, pctr_v2/ and pctr_v2_b/ (pctr_v2's model
//     under a second path), immediately valid, and pctr_v1/ as a
//     never-valid shadow at sample rate 1.0. The shadow load: POST
//     /ads/pctr/2/gp, GraphPipe, large batches, closed loop. The fair router
//     splits the requests between the champions, and each is copied to
//     pctr_v1/, which runs it at the lowest priority in micro-batches.
//
// Two champions because one cannot saturate the shadow: pctr_v2 costs what
// pctr_v1 costs, so with one champion the copies arrive about as fast as
// pctr_v1/'s actor runs them and its queue keeps emptying (measured: non-
// empty in 40-75% of samples). With two, copies arrive faster than one actor
// can run them, the queue stays full and the excess is dropped, which is
// the "saturating shadow load" the requirement speaks of.
//
// The shadow load speaks GraphPipe (raw float32 tensors in a flatbuffer)
// rather than ForestFlow JSON on purpose: parsing 256 rows of JSON numbers
// costs the server far more CPU than the two forward calls, so a JSON load
// starves everything of CPU long before it fills pctr_v1/'s queue (measured:
// ~80 req/s of b256 JSON and an empty shadow queue on 2 cores). GraphPipe
// makes the load mostly model work, which is what the mailbox arbitrates.
//
// A third contract is the control: ads/pctr/3 is ads/pctr/2 with its
// shadow on pctr_v1_twin/, the same model file under another path, so a
// model actor of its own. The same load through it costs the machine the
// same CPU but leaves pctr_v1/'s mailbox alone: the user p99 under it is
// what CPU contention alone does, and the difference to the shadow phase
// is what sharing the actor does.
//
// A fourth contract, ads/pctr/4, is ads/pctr/2 without any shadow: the
// same load through it is the "no-shadow" reference the requirement is
// judged against. The load is real user traffic of another contract and
// costs CPU whether or not it is copied; what shadow mode adds is the
// copies, so the verdict is the user p99 with the shadow copies over the
// user p99 under the same load without them. The p99 with no load at all
// is reported next to it.
//
// The user stream runs in phases, without the load, with the load and no
// shadow, with it (shadow on pctr_v1/) and with the control load (shadow on
// the twin), for some rounds; the p99s of each kind of phase are pooled
// over the rounds.
// During each measured window grovebench samples GET /metrics every 100 ms
// (the shadow model's queue depth; shadow executions, drops, the load's
// requests; the user requests' model-actor and HTTP histograms) and reads
// the CPU time of grove, of itself and of the machine from /proc, so the
// report can tell mailbox queueing from CPU contention, and both from
// whatever else runs on the machine.

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

const (
	// serverShadow names the scenario in --scenarios ("shadow", "shadow/b1c8").
	serverShadow = "shadow"
	// shadowServerName is the grove instance the scenario starts.
	shadowServerName = "grove (shadow)"
	// championPath and champion2Path answer the load's contracts; modelPath
	// (pctr_v1/) answers the user stream and runs the shadow copies.
	championPath  = "pctr_v2/"
	champion2Path = "pctr_v2_b/"
	// twinPath is pctr_v1/'s model file under another path: the control's
	// shadow target, with an actor of its own.
	twinPath = "pctr_v1_twin/"
	// userContract, loadContract and twinContract are the contracts' paths.
	userContract  = "ads/pctr/1"
	loadContract  = "ads/pctr/2"
	twinContract  = "ads/pctr/3"
	plainContract = "ads/pctr/4"
	// shadowTarget is the bound on shadow p99 over no-shadow p99.
	shadowTarget = 1.5
	// defaultMicroBatchRows is grove's default shadow_micro_batch_rows.
	defaultMicroBatchRows = 64
	// sampleEvery is how often /metrics is read during a measured window.
	sampleEvery = 100 * time.Millisecond
	// idleTimeout bounds the wait for pctr_v1/'s queue to empty after a phase.
	idleTimeout = 30 * time.Second
)

// The defaults of the shadow scenario: the user stream's shape (for a bare
// "shadow" in --scenarios), the shadow load's (--shadow-load) and the rounds.
var defaultShadowUser = shape{Batch: 1, Conc: 8}

const (
	defaultShadowLoad   = "b256c6"
	defaultShadowRounds = 2
)

// shape is a batch size and a number of closed-loop clients.
type shape struct {
	Batch int `json:"batch"`
	Conc  int `json:"concurrency"`
}

func (s shape) String() string { return fmt.Sprintf("b%dc%d", s.Batch, s.Conc) }

// parseShape parses "bNcM".
func parseShape(s string) (shape, error) {
	m := shapeRE.FindStringSubmatch(strings.ToLower(strings.TrimSpace(s)))
	if m == nil {
		return shape{}, fmt.Errorf("bad shape %q: want bNcM, e.g. b1c8 for batch 1 at concurrency 8", s)
	}
	b, err1 := strconv.Atoi(m[1])
	c, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil || b < 1 || c < 1 || b > 100000 || c > 10000 {
		return shape{}, fmt.Errorf("bad shape %q: batch and concurrency must be positive (and sane)", s)
	}
	return shape{b, c}, nil
}

// splitShadowSpec takes the shadow entries out of a --scenarios value:
// "shadow" (the user stream at defaultShadowUser) and "shadow/bNcM" (the
// user stream at that shape). It returns the other entries, unchanged, and
// the user shapes in order of first appearance, without repeats.
func splitShadowSpec(spec string) (rest string, users []shape, err error) {
	var others []string
	for _, e := range strings.Split(spec, ",") {
		le := strings.ToLower(strings.TrimSpace(e))
		var u shape
		switch {
		case le == serverShadow:
			u = defaultShadowUser
		case strings.HasPrefix(le, serverShadow+"/"):
			if u, err = parseShape(strings.TrimPrefix(le, serverShadow+"/")); err != nil {
				return "", nil, fmt.Errorf("bad scenario %q: %v", e, err)
			}
		default:
			others = append(others, e)
			continue
		}
		if !slices.Contains(users, u) {
			users = append(users, u)
		}
	}
	return strings.Join(others, ","), users, nil
}

// microBatchRows is the shadow micro-batch size grove serve runs with:
// --shadow-micro-batch-rows from its extra arguments, or grove's default.
func microBatchRows(args []string) int {
	rows := defaultMicroBatchRows
	for i := 0; i < len(args); i++ {
		a := strings.TrimPrefix(strings.TrimPrefix(args[i], "-"), "-")
		name, val, hasVal := strings.Cut(a, "=")
		if name != "shadow-micro-batch-rows" {
			continue
		}
		if !hasVal && i+1 < len(args) {
			i++
			val = args[i]
		}
		if n, err := strconv.Atoi(val); err == nil {
			rows = n
		}
	}
	return rows
}

// shadowConfig is the bucket's model config: the pctr models, the second
// champion, the twin and the four contracts.
const shadowConfig = `{"model_metadata": [{"model_path": "pctr_v1/"}, {"model_path": "pctr_v2/"}, {"model_path": "pctr_v2_b/"}, {"model_path": "pctr_v1_twin/"}],
 "contracts": [
  {"organization": "ads", "project": "pctr", "contract_number": 1,
   "servables": [{"release_version": "v1", "model_path": "pctr_v1/", "validity": [{"immediately_valid": {}}]}]},
  {"organization": "ads", "project": "pctr", "contract_number": 2,
   "servables": [{"release_version": "v2", "model_path": "pctr_v2/", "validity": [{"immediately_valid": {}}]},
                 {"release_version": "v2b", "model_path": "pctr_v2_b/", "validity": [{"immediately_valid": {}}]},
                 {"release_version": "v1", "model_path": "pctr_v1/", "validity": [{"never_valid": {}}], "shadow": {"sample_rate": 1.0}}]},
  {"organization": "ads", "project": "pctr", "contract_number": 3,
   "servables": [{"release_version": "v2", "model_path": "pctr_v2/", "validity": [{"immediately_valid": {}}]},
                 {"release_version": "v2b", "model_path": "pctr_v2_b/", "validity": [{"immediately_valid": {}}]},
                 {"release_version": "v1", "model_path": "pctr_v1_twin/", "validity": [{"never_valid": {}}], "shadow": {"sample_rate": 1.0}}]},
  {"organization": "ads", "project": "pctr", "contract_number": 4,
   "servables": [{"release_version": "v2", "model_path": "pctr_v2/", "validity": [{"immediately_valid": {}}]},
                 {"release_version": "v2b", "model_path": "pctr_v2_b/", "validity": [{"immediately_valid": {}}]}]}]}
`

// writeShadowBucket writes a bucket dir holding pctr_v1/ and pctr_v2/ of the
// example bucket, their models again as pctr_v1_twin/ and pctr_v2_b/, and
// shadowConfig.
func writeShadowBucket(examples, dir string) error {
	for p, src := range map[string]string{modelPath: modelPath, championPath: championPath, champion2Path: championPath, twinPath: modelPath} {
		if err := os.MkdirAll(filepath.Join(dir, p), 0o755); err != nil {
			return err
		}
		model, err := os.ReadFile(filepath.Join(examples, src, "model.pt"))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, p, "model.pt"), model, 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "model_config.json"), []byte(shadowConfig), 0o644)
}

// shadowEnv is what the shadow scenario needs from the rest of grovebench.
type shadowEnv struct {
	bin, examples, dir string
	groveArgs          []string
	rows               [][]float64
	want1, want2       []float64 // expected outputs of pctr_v1 and pctr_v2 for rows
	users              []shape
	userRate           float64 // 0: closed loop
	load               shape
	rounds             int
	warmup, duration   time.Duration
	timeout            time.Duration
	startTimeout       time.Duration
	logf               func(format string, a ...any)
	client             *http.Client // for /metrics
}

// runShadow starts grove on the shadow bucket, checks both contracts and
// runs every user shape. Problems that stop it are in the report's Error.
func runShadow(ctx context.Context, e shadowEnv) *shadowReport {
	e.client = &http.Client{Timeout: 5 * time.Second}
	rep := &shadowReport{Model: modelPath, Champions: []string{championPath, champion2Path}, UserContract: userContract, LoadContract: loadContract,
		UserAPI: "POST /" + userContract + "/score (ForestFlow BASIC JSON)", LoadAPI: "POST /" + loadContract + "/gp (GraphPipe)",
		TwinModel: twinPath, TwinContract: twinContract, PlainContract: plainContract, UserRate: e.userRate,
		Load: e.load, SampleRate: 1, MicroBatchRows: microBatchRows(e.groveArgs), Rounds: e.rounds,
		Warmup: e.warmup.String(), Duration: e.duration.String(), Target: shadowTarget, CPUs: hostInfo().CPUs}
	bucket := filepath.Join(e.dir, "bucket-shadow")
	if err := writeShadowBucket(e.examples, bucket); err != nil {
		rep.Error = fmt.Sprintf("writing the shadow bucket: %v", err)
		return rep
	}
	g, ep, err := startGrove(ctx, shadowServerName, e.bin, bucket, filepath.Join(e.dir, "cache-shadow"),
		filepath.Join(e.dir, "grove-shadow.log"), e.groveArgs, e.startTimeout)
	if g != nil {
		defer func() {
			if err := g.stop(); err != nil {
				rep.note("%s: %v", shadowServerName, err)
			}
		}()
	}
	if err != nil {
		rep.Error = fmt.Sprintf("starting %s: %v", shadowServerName, err)
		return rep
	}
	base := ep.baseURL
	e.logf("%s ready at %s", shadowServerName, base)
	userEP := &endpoint{server: shadowServerName, api: rep.UserAPI, baseURL: base, url: base + "/" + userContract + "/score",
		rowsBody: forestflowBody, outputs: releaseOutputs("v1")}
	if err := checkAnswer(ctx, userEP, e.rows, e.want1, e.timeout); err != nil {
		rep.Error = fmt.Sprintf("%s answered the check request on %s wrongly: %v", shadowServerName, userContract, err)
		return rep
	}
	urls := map[phaseKind]string{}
	for _, k := range []phaseKind{phaseLoad, phaseShadow, phaseTwin} {
		ep := &endpoint{server: shadowServerName, api: rep.LoadAPI, baseURL: base, url: base + "/" + k.contract() + "/gp",
			rowsBody: graphpipeBody, outputs: graphpipeOutputs}
		if err := checkAnswer(ctx, ep, e.rows, e.want2, e.timeout); err != nil {
			rep.Error = fmt.Sprintf("%s answered the check request on %s wrongly: %v", shadowServerName, k.contract(), err)
			return rep
		}
		// The check request must have become a shadow execution on the
		// phase's shadow model: that is the point of the set-up.
		if k == phaseLoad {
			urls[k] = ep.url
			continue
		}
		if err := e.waitShadowExecuted(ctx, base, k); err != nil {
			rep.Error = err.Error()
			return rep
		}
		urls[k] = ep.url
	}
	for _, u := range e.users {
		rep.Runs = append(rep.Runs, e.runShape(ctx, g.cmd.Process.Pid, base, userEP.url, urls, u))
		if ctx.Err() != nil {
			break
		}
	}
	return rep
}

// releaseOutputs checks a ForestFlow answer came from release and returns its outputs.
func releaseOutputs(release string) func([]byte) ([]float64, error) {
	return func(body []byte) ([]float64, error) {
		out, rel, err := forestflowOutputs(body)
		if err == nil && rel != release {
			err = fmt.Errorf("answered by release %q, want %q", rel, release)
		}
		return out, err
	}
}

// phaseKind is what runs beside the user stream in a phase.
type phaseKind string

// The kinds of phase, in the order a round runs them.
const (
	phaseNone   phaseKind = "no_shadow" // the user stream alone
	phaseLoad   phaseKind = "load"      // with the load, no shadow copies anywhere
	phaseShadow phaseKind = "shadow"    // with the load, shadow on the user's model
	phaseTwin   phaseKind = "twin"      // with the load, shadow on the twin (the control)
)

var phaseKinds = []phaseKind{phaseNone, phaseLoad, phaseShadow, phaseTwin}

// label is the kind's name in the table.
func (k phaseKind) label() string {
	switch k {
	case phaseShadow:
		return "shadow"
	case phaseTwin:
		return "control: shadow on twin"
	case phaseLoad:
		return "load, no shadow"
	}
	return "no load"
}

// contract is the contract the phase's load goes to ("" for none).
func (k phaseKind) contract() string {
	switch k {
	case phaseShadow:
		return loadContract
	case phaseTwin:
		return twinContract
	case phaseLoad:
		return plainContract
	}
	return ""
}

// shadowModel is the model whose shadow queue the phase watches: the twin
// in the control, else the user's model.
func (k phaseKind) shadowModel() string {
	if k == phaseTwin {
		return twinPath
	}
	return modelPath
}

// The /metrics series the scenario reads.
var (
	seriesUser = map[string]string{"api": "forestflow", "model": modelPath}
	seriesLoad = map[string]string{"api": "graphpipe"} // both champions
	seriesHTTP = map[string]string{"api": "forestflow"}
)

func seriesShadow(model string) map[string]string {
	return map[string]string{"api": "graphpipe-shadow", "model": model}
}

const (
	metricRequests = "grove_model_requests_total"
	metricModelDur = "grove_model_request_duration_seconds"
	metricHTTPDur  = "grove_http_request_duration_seconds"
	metricDropped  = "grove_shadow_dropped_total"
	metricQueue    = "grove_model_queue_depth"
	metricInflight = "grove_model_inflight"
)

func (e *shadowEnv) waitShadowExecuted(ctx context.Context, base string, k phaseKind) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := fetchProm(ctx, e.client, base)
		if err != nil {
			return fmt.Errorf("%s: %v", shadowServerName, err)
		}
		if p.sum(metricRequests, seriesShadow(k.shadowModel())) >= 1 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s: no shadow execution on %s 10s after a request to %s (no %s{api=\"graphpipe-shadow\",model=%q})",
				shadowServerName, k.shadowModel(), k.contract(), metricRequests, k.shadowModel())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// runShape primes the server, then runs the rounds of the phases for one
// user shape.
func (e *shadowEnv) runShape(ctx context.Context, pid int, base, userURL string, loadURLs map[phaseKind]string, u shape) shadowRun {
	run := shadowRun{User: u}
	user := loadSpec{url: userURL, body: forestflowBody(repeat(e.rows[0], u.Batch)), okMarker: []byte(`"Prediction"`),
		batch: u.Batch, conc: u.Conc, warmup: e.warmup, duration: e.duration, timeout: e.timeout, rate: e.userRate}
	loads := map[phaseKind]loadSpec{}
	for k, url := range loadURLs {
		loads[k] = loadSpec{url: url, body: graphpipeBody(repeat(e.rows[0], e.load.Batch)), contentType: "application/octet-stream",
			batch: e.load.Batch, conc: e.load.Conc, timeout: e.timeout}
	}

	// Prime both streams together, unmeasured: TorchScript's profiling
	// executor specialises per input shape, and the no-shadow phase that
	// comes first should not pay for the shadow phase's shapes.
	prime := user
	prime.warmup, prime.duration = 0, max(e.warmup, 500*time.Millisecond)
	e.logf("shadow %s: priming (user stream with both loads, %v)", u, prime.duration)
	var bgs []*background
	for _, k := range []phaseKind{phaseShadow, phaseTwin} {
		bgs = append(bgs, startBackground(ctx, loads[k]))
	}
	if r := runLoad(ctx, prime); r.Errors > 0 {
		run.note("priming: %d failed user requests; first: %s", r.Errors, r.FirstError)
	}
	for _, bg := range bgs {
		if r := bg.stop(); r.Errors > 0 {
			run.note("priming: %d failed load requests; first: %s", r.Errors, r.FirstError)
		}
	}
	if _, err := e.waitIdle(ctx, base); err != nil {
		run.note("priming: %v", err)
	}

	for round := 1; round <= e.rounds && ctx.Err() == nil; round++ {
		for _, k := range phaseKinds {
			ph := e.phase(ctx, pid, base, user, loads[k], k)
			ph.Round = round
			if ctx.Err() != nil {
				return run
			}
			s := ph.Server
			e.logf("shadow %s round %d %s: %.0f req/s, p50 %s, p99 %s, %d errors; load %.0f req/s, shadow %.0f exec/s, %d dropped, queue busy %.0f%%; CPU grove %.2f, grovebench %.2f, machine %.0f%%",
				u, round, ph.Kind.label(), ph.User.ReqPerSec, fmtDur(ph.User.P50), fmtDur(ph.User.P99), ph.User.Errors,
				s.rate(s.LoadRequests), s.rate(s.ShadowExecutions), s.ShadowDropped, 100*s.QueueBusy,
				s.CPU.Grove, s.CPU.Bench, 100*s.CPU.Machine)
			run.Phases = append(run.Phases, ph)
		}
	}
	run.finish()
	return run
}

// phase measures the user stream once, alone or beside the load of kind k.
func (e *shadowEnv) phase(ctx context.Context, pid int, base string, user, load loadSpec, k phaseKind) shadowPhase {
	ph := shadowPhase{Kind: k}
	var bg *background
	if k != phaseNone {
		// The load starts with the user stream's warm-up, which gives the
		// shadow queue that long to fill before the window opens.
		bg = startBackground(ctx, load)
	}
	start := time.Now()
	sampled := make(chan serverSamples, 1)
	go func() {
		sampled <- e.sample(ctx, base, pid, k.shadowModel(), start.Add(user.warmup), start.Add(user.warmup+user.duration))
	}()
	ph.User = runLoad(ctx, user)
	s := <-sampled
	if bg != nil {
		r := bg.stop()
		r.Latencies = nil
		ph.Load = &r
	}
	ph.Server = s.stats(k.shadowModel())
	idle, err := e.waitIdle(ctx, base)
	ph.Drain = idle
	if err != nil && ctx.Err() == nil {
		ph.Server.Error = strings.TrimPrefix(ph.Server.Error+"; "+err.Error(), "; ")
	}
	return ph
}

// background is a closed-loop load running until stopped.
type background struct {
	cancel context.CancelFunc
	done   chan loadResult
}

func startBackground(ctx context.Context, spec loadSpec) *background {
	bctx, cancel := context.WithCancel(ctx)
	spec.warmup, spec.duration = 0, 24*time.Hour
	b := &background{cancel: cancel, done: make(chan loadResult, 1)}
	go func() { b.done <- runLoad(bctx, spec) }()
	return b
}

// stop cancels the load (its requests in flight are abandoned, not counted
// as errors) and returns what it did.
func (b *background) stop() loadResult {
	b.cancel()
	return <-b.done
}

// serverSamples is what sample read during one measured window.
type serverSamples struct {
	first, last promSnapshot
	cpuA, cpuB  cpuReading
	queue       []float64
	err         error
}

// sample reads /metrics at from, every sampleEvery, and at to (or just
// after), with the CPU times next to the first and last reads.
func (e *shadowEnv) sample(ctx context.Context, base string, pid int, shadowModel string, from, to time.Time) serverSamples {
	var s serverSamples
	if !sleepUntil(ctx, from) {
		s.err = ctx.Err()
		return s
	}
	for {
		now := time.Now()
		final := !now.Before(to)
		var cpu cpuReading
		if s.first == nil || final {
			cpu = readCPU(pid)
		}
		p, err := fetchProm(ctx, e.client, base)
		if err != nil {
			if s.err == nil {
				s.err = err
			}
		} else {
			if s.first == nil {
				s.first, s.cpuA = p, cpu
			}
			s.last, s.cpuB = p, cpu
			s.queue = append(s.queue, p.sum(metricQueue, map[string]string{"model": shadowModel}))
		}
		if final || ctx.Err() != nil {
			return s
		}
		if !sleepUntil(ctx, minTime(now.Add(sampleEvery), to)) {
			return s
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// sleepUntil sleeps until t; false if ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

// stats turns a window's samples into the server-side figures; the shadow
// figures and the queue are shadowModel's.
func (s serverSamples) stats(shadowModel string) shadowServer {
	var st shadowServer
	if s.err != nil {
		st.Error = s.err.Error()
	}
	if s.first == nil || s.last == nil {
		if st.Error == "" {
			st.Error = "no /metrics sample"
		}
		return st
	}
	delta := func(name string, match map[string]string) int64 {
		return int64(s.last.sum(name, match) - s.first.sum(name, match))
	}
	st.Window = s.cpuB.at.Sub(s.cpuA.at)
	st.UserRequests = delta(metricRequests, seriesUser)
	st.LoadRequests = delta(metricRequests, seriesLoad)
	ok := seriesShadow(shadowModel)
	ok["outcome"] = "ok"
	st.ShadowModel = shadowModel
	st.ShadowExecutions = delta(metricRequests, seriesShadow(shadowModel))
	st.ShadowFailed = st.ShadowExecutions - delta(metricRequests, ok)
	st.ShadowDropped = delta(metricDropped, map[string]string{"model": shadowModel})
	st.actor = bucketsDelta(s.first.buckets(metricModelDur, seriesUser), s.last.buckets(metricModelDur, seriesUser))
	st.http = bucketsDelta(s.first.buckets(metricHTTPDur, seriesHTTP), s.last.buckets(metricHTTPDur, seriesHTTP))
	st.QueueSamples = len(s.queue)
	for _, q := range s.queue {
		if q > 0 {
			st.QueueBusy++
		}
		st.QueueMean += q
		st.QueueMax = max(st.QueueMax, q)
	}
	if n := float64(len(s.queue)); n > 0 {
		st.QueueBusy /= n
		st.QueueMean /= n
	}
	st.CPU = cpuBetween(s.cpuA, s.cpuB)
	st.bounds()
	return st
}

// waitIdle waits until the models have nothing queued or in flight, so one
// phase's shadow backlog does not spill into the next; it returns how long
// that took.
func (e *shadowEnv) waitIdle(ctx context.Context, base string) (time.Duration, error) {
	start := time.Now()
	for {
		p, err := fetchProm(ctx, e.client, base)
		if err != nil {
			return time.Since(start), err
		}
		busy := 0.0
		for _, m := range []string{modelPath, championPath, champion2Path, twinPath} {
			busy += p.sum(metricQueue, map[string]string{"model": m}) + p.sum(metricInflight, map[string]string{"model": m})
		}
		if busy == 0 {
			return time.Since(start), nil
		}
		if time.Since(start) > idleTimeout {
			return time.Since(start), fmt.Errorf("%s still had %.0f requests queued or in flight %v after the phase", shadowServerName, busy, idleTimeout)
		}
		if !sleepUntil(ctx, time.Now().Add(20*time.Millisecond)) {
			return time.Since(start), ctx.Err()
		}
	}
}
