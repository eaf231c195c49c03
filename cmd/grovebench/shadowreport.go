package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// shadowReport is what the shadow scenario measured.
type shadowReport struct {
	// Model serves the user stream and runs the shadow copies; Champions
	// answer the load; TwinModel is Model's file under another path, the
	// control's shadow target.
	Model        string   `json:"model"`
	Champions    []string `json:"champions"`
	TwinModel    string   `json:"twin_model"`
	UserContract string   `json:"user_contract"`
	LoadContract string   `json:"load_contract"`
	TwinContract string   `json:"twin_contract"`
	// PlainContract takes the same load with no shadow: the reference.
	PlainContract string `json:"plain_contract"`
	UserAPI       string `json:"user_api"`
	// UserRate paces the user stream (requests per second); 0 is closed loop.
	UserRate       float64 `json:"user_rate,omitempty"`
	LoadAPI        string  `json:"load_api"`
	Load           shape   `json:"load"`
	SampleRate     float64 `json:"shadow_sample_rate"`
	MicroBatchRows int     `json:"micro_batch_rows"`
	Rounds         int     `json:"rounds"`
	Warmup         string  `json:"warmup"`
	Duration       string  `json:"duration"`
	// Target is the bound on the shadow p99 over the no-shadow p99.
	Target float64     `json:"target_ratio"`
	CPUs   int         `json:"cpus"`
	Runs   []shadowRun `json:"runs,omitempty"`
	// Error says why the scenario stopped (grove failed to start, answered
	// wrongly, ...); the runs measured before are kept.
	Error string   `json:"error,omitempty"`
	Notes []string `json:"notes,omitempty"`
}

func (r *shadowReport) note(format string, a ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, a...))
}

// shadowRun is one user shape's phases and their pooled figures.
type shadowRun struct {
	User   shape         `json:"user"`
	Phases []shadowPhase `json:"phases"`
	// NoShadow, LoadOnly, Shadow and Twin pool the phases of each kind.
	NoShadow shadowPooled `json:"no_shadow"`
	LoadOnly shadowPooled `json:"load_no_shadow"`
	Shadow   shadowPooled `json:"shadow"`
	Twin     shadowPooled `json:"twin"`
	// Ratio is Shadow.P99 over LoadOnly.P99, what the shadow copies add
	// under the same load (0 when either is missing); Met says it is at
	// most the target. IdleRatio is Shadow.P99 over NoShadow.P99, the load
	// and its copies together; TwinRatio is Twin.P99 over LoadOnly.P99:
	// the copies' cost when they run on another actor.
	Ratio     float64  `json:"p99_ratio"`
	Met       bool     `json:"met_target"`
	IdleRatio float64  `json:"idle_p99_ratio"`
	TwinRatio float64  `json:"twin_p99_ratio"`
	Notes     []string `json:"notes,omitempty"`
}

func (r *shadowRun) note(format string, a ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, a...))
}

// shadowPhase is one measured window of the user stream.
type shadowPhase struct {
	Round int       `json:"round"`
	Kind  phaseKind `json:"phase"`
	// User is the user stream; Load the shadow load (nil without it; its
	// rates are in Server, from grove's counters over the window).
	User   loadResult   `json:"user"`
	Load   *loadResult  `json:"load,omitempty"`
	Server shadowServer `json:"server"`
	// Drain is how long pctr_v1/'s queue took to empty after the phase.
	Drain time.Duration `json:"drain_ns"`
}

// shadowServer is what grove's /metrics and /proc said over a measured window.
type shadowServer struct {
	Window time.Duration `json:"window_ns"`
	// ShadowModel is the model the shadow figures and the queue are about.
	ShadowModel string `json:"shadow_model"`
	// Counts over the window: user requests on the model, the load's
	// requests on the champion, shadow executions on the model (failed:
	// not "ok"), shadow copies dropped for the model.
	UserRequests     int64 `json:"user_requests"`
	LoadRequests     int64 `json:"load_requests"`
	ShadowExecutions int64 `json:"shadow_executions"`
	ShadowFailed     int64 `json:"shadow_failed"`
	ShadowDropped    int64 `json:"shadow_dropped"`
	// The model's queue depth (grove_model_queue_depth) over the samples:
	// the share of samples above 0, the mean and the largest.
	QueueSamples int     `json:"queue_samples"`
	QueueBusy    float64 `json:"queue_busy"`
	QueueMean    float64 `json:"queue_mean"`
	QueueMax     float64 `json:"queue_max"`
	// Upper bounds of the histogram buckets holding the user requests' p50
	// and p99 of the time in the model's actor (queue + forward) and the p99
	// of grove's HTTP handling (read to written); 0 when unknown, maxDur
	// when above the largest bucket.
	ActorP50 time.Duration `json:"actor_p50_le_ns"`
	ActorP99 time.Duration `json:"actor_p99_le_ns"`
	HTTPP99  time.Duration `json:"http_p99_le_ns"`
	CPU      cpuUse        `json:"cpu"`
	Error    string        `json:"error,omitempty"`

	actor, http []promBucket // the histograms' observations over the window
}

// maxDur stands for a bound of +Inf.
const maxDur = time.Duration(math.MaxInt64)

// bounds fills the histogram bounds from the observations.
func (s *shadowServer) bounds() {
	s.ActorP50 = boundDur(s.actor, 0.50)
	s.ActorP99 = boundDur(s.actor, 0.99)
	s.HTTPP99 = boundDur(s.http, 0.99)
}

func boundDur(b []promBucket, q float64) time.Duration {
	v, ok := histBound(b, q)
	switch {
	case !ok:
		return 0
	case math.IsInf(v, 1):
		return maxDur
	}
	return time.Duration(math.Round(v * 1e9))
}

// rate is n per second of the window.
func (s shadowServer) rate(n int64) float64 {
	if s.Window <= 0 {
		return 0
	}
	return float64(n) / s.Window.Seconds()
}

// add accumulates o into s (counts and histograms summed, shares and CPU
// weighted by window or samples, the largest queue kept).
func (s *shadowServer) add(o shadowServer) {
	w, ow := s.Window.Seconds(), o.Window.Seconds()
	if w+ow > 0 {
		s.CPU.Grove = (s.CPU.Grove*w + o.CPU.Grove*ow) / (w + ow)
		s.CPU.Bench = (s.CPU.Bench*w + o.CPU.Bench*ow) / (w + ow)
		s.CPU.Machine = (s.CPU.Machine*w + o.CPU.Machine*ow) / (w + ow)
		s.CPU.Other = (s.CPU.Other*w + o.CPU.Other*ow) / (w + ow)
	}
	n, on := float64(s.QueueSamples), float64(o.QueueSamples)
	if n+on > 0 {
		s.QueueBusy = (s.QueueBusy*n + o.QueueBusy*on) / (n + on)
		s.QueueMean = (s.QueueMean*n + o.QueueMean*on) / (n + on)
	}
	s.QueueMax = max(s.QueueMax, o.QueueMax)
	s.ShadowModel = o.ShadowModel
	s.QueueSamples += o.QueueSamples
	s.Window += o.Window
	s.UserRequests += o.UserRequests
	s.LoadRequests += o.LoadRequests
	s.ShadowExecutions += o.ShadowExecutions
	s.ShadowFailed += o.ShadowFailed
	s.ShadowDropped += o.ShadowDropped
	s.actor = addBuckets(s.actor, o.actor)
	s.http = addBuckets(s.http, o.http)
	if o.Error != "" {
		s.Error = strings.TrimPrefix(s.Error+"; "+o.Error, "; ")
	}
	s.bounds()
}

// addBuckets sums two sets of cumulative buckets with the same bounds (a
// bound missing from one counts as 0 there).
func addBuckets(a, b []promBucket) []promBucket {
	if len(a) == 0 {
		return append([]promBucket(nil), b...)
	}
	out := append([]promBucket(nil), a...)
	idx := map[float64]int{}
	for i, x := range out {
		idx[x.LE] = i
	}
	for _, x := range b {
		if i, ok := idx[x.LE]; ok {
			out[i].Count += x.Count
		} else {
			out = append(out, x)
		}
	}
	return out
}

// saturation says whether the shadow load kept the model's queue from
// emptying: "saturated" when at least 90% of the samples saw a queue,
// "saturated at times" when it fell short of that but shadow copies were
// dropped (the queue reached its share of the model's limit), else
// "NOT saturated".
func (s shadowServer) saturation() string {
	switch {
	case s.QueueSamples > 0 && s.QueueBusy >= 0.9:
		return "saturated"
	case s.ShadowDropped > 0:
		return fmt.Sprintf("saturated at times (it reached its shadow cap, but was empty in %.0f%% of samples)", 100*(1-s.QueueBusy))
	}
	return "NOT saturated (the queue kept emptying: a lighter shadow load than the requirement asks for; raise --shadow-load)"
}

// shadowPooled is one condition pooled over the rounds.
type shadowPooled struct {
	Phases    int           `json:"phases"`
	Requests  int           `json:"requests"`
	ReqPerSec float64       `json:"req_per_sec"` // mean over the phases
	Errors    int           `json:"errors"`
	P50       time.Duration `json:"p50_ns"`
	P99       time.Duration `json:"p99_ns"`
	Max       time.Duration `json:"max_ns"`
	Server    shadowServer  `json:"server"`
}

// pool pools the phases of one kind: the latencies are merged, so the
// percentiles are over every measured request of that kind.
func pool(phases []shadowPhase, k phaseKind) shadowPooled {
	var p shadowPooled
	var all loadResult
	for _, ph := range phases {
		if ph.Kind != k {
			continue
		}
		p.Phases++
		p.Requests += ph.User.Requests
		p.ReqPerSec += ph.User.ReqPerSec
		p.Errors += ph.User.Errors
		all.Latencies = append(all.Latencies, ph.User.Latencies...)
		p.Server.add(ph.Server)
	}
	if p.Phases > 0 {
		p.ReqPerSec /= float64(p.Phases)
	}
	all.summarize()
	p.P50, p.P99, p.Max = all.P50, all.P99, all.Max
	return p
}

// finish pools the phases and computes the ratios.
func (r *shadowRun) finish() {
	r.NoShadow, r.LoadOnly = pool(r.Phases, phaseNone), pool(r.Phases, phaseLoad)
	r.Shadow, r.Twin = pool(r.Phases, phaseShadow), pool(r.Phases, phaseTwin)
	r.Ratio, r.Met = p99Ratio(r.LoadOnly.P99, r.Shadow.P99)
	r.IdleRatio, _ = p99Ratio(r.NoShadow.P99, r.Shadow.P99)
	r.TwinRatio, _ = p99Ratio(r.LoadOnly.P99, r.Twin.P99)
}

// p99Ratio is shadow over noShadow and whether it is within shadowTarget;
// 0 and false when either is missing.
func p99Ratio(noShadow, shadow time.Duration) (float64, bool) {
	if noShadow <= 0 || shadow <= 0 {
		return 0, false
	}
	r := float64(shadow) / float64(noShadow)
	return r, r <= shadowTarget
}

// errors is the number of failed grove requests of the scenario: the user
// stream's and the shadow load's.
func (r *shadowReport) errors() int {
	if r == nil {
		return 0
	}
	n := 0
	for _, run := range r.Runs {
		for _, ph := range run.Phases {
			n += ph.User.Errors
			if ph.Load != nil {
				n += ph.Load.Errors
			}
		}
	}
	return n
}

// fmtBound renders a histogram bucket bound as "≤ x".
func fmtBound(d time.Duration) string {
	switch d {
	case 0:
		return "n/a"
	case maxDur:
		return "> largest bucket"
	}
	return "≤ " + fmtDur(d)
}

// writeMarkdown prints the scenario's section: a table of the phases and
// the pooled rows, then per user shape the verdict, the shadow load and
// where the time went.
func (r *shadowReport) writeMarkdown(w io.Writer) {
	if r == nil {
		return
	}
	stream := "closed loop"
	if r.UserRate > 0 {
		stream = fmt.Sprintf("paced at %s req/s in all, latency from each request's scheduled start", fmtRate(r.UserRate))
	}
	fmt.Fprintf(w, "\nShadow load on the user's model (%s), one grove process. User stream: %s on contract %s (champion %s, no shadows), %s. "+
		"Load: %s on contract %s, batch %d, c %d, closed loop: its fair router splits it between %s, and every request is copied to %s as a shadow "+
		"(sample rate %g, micro-batches of %d rows, mailbox priority 1 against the user's 6). "+
		"Reference: the same load on contract %s, the same champions without a shadow. "+
		"Control: the same load on contract %s, whose shadow is %s (the same model file under another path, so another actor). "+
		"Each round runs the user stream alone, with the load and no shadow, with the load and its shadow copies, with the control load; %s warm-up + %s measured each; %d round(s); p50/p99 pooled per phase.\n\n",
		r.Model, r.UserAPI, r.UserContract, r.Model, stream, r.LoadAPI, r.LoadContract, r.Load.Batch, r.Load.Conc, strings.Join(r.Champions, " and "), r.Model,
		r.SampleRate, r.MicroBatchRows, r.PlainContract, r.TwinContract, r.TwinModel, r.Warmup, r.Duration, r.Rounds)
	if len(r.Runs) > 0 {
		fmt.Fprintln(w, "| user batch | conc | phase | round | user req/s | p50 | p99 | max | errors | actor p99 | HTTP p99 | load req/s | shadow exec/s | dropped | shadow queue busy | grove CPU | grovebench CPU | other CPU | machine CPU |")
		fmt.Fprintln(w, "|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	}
	row := func(u shape, label, round string, reqs float64, p50, p99, mx time.Duration, n, errs int, s shadowServer) {
		lat := [3]string{"n/a", "n/a", "n/a"}
		if n > 0 {
			lat = [3]string{fmtDur(p50), fmtDur(p99), fmtDur(mx)}
		}
		queue := "n/a"
		if s.QueueSamples > 0 {
			queue = fmt.Sprintf("%.0f%% (mean %.1f)", 100*s.QueueBusy, s.QueueMean)
		}
		cpu := [4]string{"n/a", "n/a", "n/a", "n/a"}
		if s.CPU != (cpuUse{}) {
			cpu = [4]string{fmt.Sprintf("%.2f", s.CPU.Grove), fmt.Sprintf("%.2f", s.CPU.Bench), fmt.Sprintf("%.2f", s.CPU.Other),
				fmt.Sprintf("%.0f%%", 100*s.CPU.Machine)}
		}
		fmt.Fprintf(w, "| %d | %d | %s | %s | %s | %s | %s | %s | %d | %s | %s | %s | %s | %d | %s | %s | %s | %s | %s |\n",
			u.Batch, u.Conc, label, round, fmtRate(reqs), lat[0], lat[1], lat[2], errs,
			fmtBound(s.ActorP99), fmtBound(s.HTTPP99), fmtRate(s.rate(s.LoadRequests)), fmtRate(s.rate(s.ShadowExecutions)),
			s.ShadowDropped, queue, cpu[0], cpu[1], cpu[2], cpu[3])
	}
	for _, run := range r.Runs {
		for _, ph := range run.Phases {
			x := ph.User
			row(run.User, ph.Kind.label(), fmt.Sprint(ph.Round), x.ReqPerSec, x.P50, x.P99, x.Max, len(x.Latencies), x.Errors, ph.Server)
		}
		for _, k := range phaseKinds {
			if x := run.pooled(k); x.Phases > 0 {
				row(run.User, "**"+k.label()+"**", "all", x.ReqPerSec, x.P50, x.P99, x.Max, x.Requests, x.Errors, x.Server)
			}
		}
	}
	if len(r.Runs) > 0 {
		fmt.Fprintf(w, "\n- Columns: actor p99 = bucket bound of the user requests' time in %s's actor (queue wait + forward, grove_model_request_duration_seconds); "+
			"HTTP p99 = bucket bound of grove's handling of them (grove_http_request_duration_seconds); load rate, shadow rate and drops from grove's counters, "+
			"for the phase's shadow model (%s, or %s in the control); shadow queue busy = share of /metrics samples (every %v) with that model's "+
			"grove_model_queue_depth > 0; CPU from /proc: cores kept busy by grove, by grovebench and by everything else, and the busy share of the machine's %d CPUs\n",
			r.Model, r.Model, r.TwinModel, sampleEvery, r.CPUs)
	}
	for _, run := range r.Runs {
		r.writeVerdict(w, run)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "- Shadow note: %s\n", n)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "- Shadow scenario FAILED: %s\n", r.Error)
	}
}

// pooled is the pooled figures of phases of kind k.
func (r shadowRun) pooled(k phaseKind) shadowPooled {
	switch k {
	case phaseShadow:
		return r.Shadow
	case phaseTwin:
		return r.Twin
	case phaseLoad:
		return r.LoadOnly
	}
	return r.NoShadow
}

// writeVerdict prints one user shape's ratio, shadow load and breakdown.
func (r *shadowReport) writeVerdict(w io.Writer, run shadowRun) {
	u, a, l, b, c := run.User, run.NoShadow, run.LoadOnly, run.Shadow, run.Twin
	at := fmt.Sprintf("batch %d, c %d", u.Batch, u.Conc)
	if run.Ratio > 0 {
		verdict := "met"
		if !run.Met {
			verdict = "MISSED"
		}
		fmt.Fprintf(w, "- Shadow vs no-shadow user p99 at %s, under the same load: %s / %s = %.2fx (target ≤ %.2fx): %s\n",
			at, fmtDur(b.P99), fmtDur(l.P99), run.Ratio, r.Target, verdict)
	} else {
		fmt.Fprintf(w, "- Shadow vs no-shadow user p99 at %s: n/a (a phase has no measured request)\n", at)
	}
	if run.IdleRatio > 0 {
		fmt.Fprintf(w, "- With the load and its shadow copies vs no load at all, at %s: %s / %s = %.2fx (the load's own CPU cost included)\n",
			at, fmtDur(b.P99), fmtDur(a.P99), run.IdleRatio)
	}
	if run.TwinRatio > 0 && run.Ratio > 0 {
		fmt.Fprintf(w, "- Control at %s, the same load with its shadow on %s: p99 %s = %.2fx the load-only p99; "+
			"sharing %s's actor with the shadow work: %.2fx on top (shadow p99 over control p99)\n",
			at, r.TwinModel, fmtDur(c.P99), run.TwinRatio, r.Model, run.Ratio/run.TwinRatio)
	}
	for _, x := range []struct {
		k phaseKind
		p shadowPooled
	}{{phaseShadow, b}, {phaseTwin, c}} {
		if x.p.Phases == 0 {
			continue
		}
		s := x.p.Server
		failed := ""
		if s.ShadowFailed > 0 {
			failed = fmt.Sprintf(", %d of them failed", s.ShadowFailed)
		}
		fmt.Fprintf(w, "- Load at %s, %s: %d shadow executions on %s (%s/s%s), %d dropped; its queue was non-empty in %.0f%% of samples (mean depth %.1f, max %.0f): %s\n",
			at, x.k.label(), s.ShadowExecutions, s.ShadowModel, fmtRate(s.rate(s.ShadowExecutions)), failed, s.ShadowDropped,
			100*s.QueueBusy, s.QueueMean, s.QueueMax, s.saturation())
	}
	if b.Phases > 0 {
		ps := []shadowPooled{a, l, b, c}
		seq := func(f func(p shadowPooled) string) string {
			parts := make([]string, len(ps))
			for i, p := range ps {
				parts[i] = f(p)
			}
			return strings.Join(parts, " → ")
		}
		fmt.Fprintf(w, "- Where the time went at %s (no load → load, no shadow → shadow → control): user p50 %s; user time in %s's actor (queue + forward) "+
			"p50 %s, p99 %s; grove HTTP p99 %s; CPU grove %s cores, grovebench %s, other %s, machine %s busy of %d CPUs\n",
			at, seq(func(p shadowPooled) string { return fmtDur(p.P50) }), r.Model,
			seq(func(p shadowPooled) string { return fmtBound(p.Server.ActorP50) }),
			seq(func(p shadowPooled) string { return fmtBound(p.Server.ActorP99) }),
			seq(func(p shadowPooled) string { return fmtBound(p.Server.HTTPP99) }),
			seq(func(p shadowPooled) string { return fmt.Sprintf("%.2f", p.Server.CPU.Grove) }),
			seq(func(p shadowPooled) string { return fmt.Sprintf("%.2f", p.Server.CPU.Bench) }),
			seq(func(p shadowPooled) string { return fmt.Sprintf("%.2f", p.Server.CPU.Other) }),
			seq(func(p shadowPooled) string { return fmt.Sprintf("%.0f%%", 100*p.Server.CPU.Machine) }), r.CPUs)
	}
	for _, n := range run.Notes {
		fmt.Fprintf(w, "- Shadow note at %s: %s\n", at, n)
	}
	for _, ph := range run.Phases {
		if ph.User.Errors > 0 {
			fmt.Fprintf(w, "- Shadow note at %s: round %d %s: %d failed user requests; first: %s\n", at, ph.Round, ph.Kind.label(), ph.User.Errors, ph.User.FirstError)
		}
		if ph.Load != nil && ph.Load.Errors > 0 {
			fmt.Fprintf(w, "- Shadow note at %s: round %d %s: %d failed load requests; first: %s\n", at, ph.Round, ph.Kind.label(), ph.Load.Errors, ph.Load.FirstError)
		}
		if ph.Server.Error != "" {
			fmt.Fprintf(w, "- Shadow note at %s: round %d %s: %s\n", at, ph.Round, ph.Kind.label(), ph.Server.Error)
		}
	}
}
