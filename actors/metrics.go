package actors

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/servables"
)

// Metrics are the Prometheus metrics the actors update.
type Metrics struct {
	requests      *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	configPolls   *prometheus.CounterVec
	loads         *prometheus.CounterVec
	unloads       *prometheus.CounterVec
	coldStart     prometheus.Histogram
	demandHits    prometheus.Counter
	demandMisses  prometheus.Counter
	crashes       *prometheus.CounterVec
	panics        *prometheus.CounterVec
	shadowDropped *prometheus.CounterVec
	lowCPU        *prometheus.CounterVec
	compareShed   *prometheus.CounterVec
	expired       *prometheus.CounterVec
	late          *prometheus.CounterVec
	restores      *prometheus.CounterVec
	decisions     *prometheus.CounterVec
	routerShare   *prometheus.GaugeVec
	forwarded     *prometheus.CounterVec
	forwardTime   *prometheus.HistogramVec
	batched       prometheus.Counter
	reconciles    prometheus.Counter
	configErrors  prometheus.Counter

	// The disk cache of unloaded on-demand models' files (diskCache).
	diskCacheHits, diskCacheInvalid prometheus.Counter
	diskCacheBytes                  prometheus.Gauge
}

// NewMetrics creates the actors' metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grove_model_requests_total",
			Help: "Predict requests by API, model path and outcome (ok, not_found, overloaded, input_error, execution_error, output_error, crashed, deadline_exceeded, canceled, unavailable). Requests for unknown paths have model=\"\". In a cluster a request counts on the node whose model ran it (a forwarded one on the serving node, under the caller's API).",
		}, []string{"api", "model", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "grove_model_request_duration_seconds",
			Help:    "Time from dispatch to a model actor to its answer (queue wait plus forward), by API and model path.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"api", "model"}),
		configPolls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grove_config_polls_total",
			Help: "Model config polls by result (ok, fetch_error, invalid).",
		}, []string{"result"}),
		loads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grove_model_loads_total",
			Help: "Model content loads by model path, result (ok, failed) and reason (eager: a model loaded as the config lists it, or again after a failure; demand: an on-demand model a request waited for; update: a serving model's content replaced).",
		}, []string{"model", "result", "reason"}),
		unloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grove_model_unloads_total",
			Help: "On-demand models unloaded while still listed, by model path and reason (budget: to make room under memory_budget_bytes for another load; idle: unused for idle_unload_after). Models removed from the config are not counted.",
		}, []string{"model", "reason"}),
		coldStart: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "grove_model_cold_start_seconds",
			Help:    "Time from the demand for an unloaded on-demand model to its content serving (fetch, checksum, the wait for a load slot and for room, load, warm-up), for the loads that succeeded.",
			Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}),
		demandHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "grove_model_demand_hits_total",
			Help: "Requests for on-demand models that found their model loaded. The hit ratio is hits / (hits + misses).",
		}),
		demandMisses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "grove_model_demand_misses_total",
			Help: "Requests for on-demand models that had to wait for their model's load (or got \"model is loading\" when their deadline ended first).",
		}),
		diskCacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "grove_model_disk_cache_hits_total",
			Help: "Loads of on-demand models that used the files kept on disk when the same content was unloaded (disk_cache_bytes) instead of fetching them from the bucket.",
		}),
		diskCacheInvalid: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "grove_model_disk_cache_invalid_total",
			Help: "Files kept in the disk cache that no longer had their checksum when a load was to use them: deleted, and the model fetched from the bucket again.",
		}),
		diskCacheBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "grove_model_disk_cache_bytes",
			Help: "Bytes of model files the disk cache keeps for unloaded on-demand models (at most disk_cache_bytes).",
		}),
		crashes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grove_model_crashes_total",
			Help: "Model actor crashes (panics) that restarted the model, by model path.",
		}, []string{"model"}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grove_actor_panics_total",
			Help: "Panics of the supervisor or the router, or of a model's fetch, load, warm-up or release of its files, a config poll, the router's forward to another node, a servable's close by the supervisor, a model actor's reload after a crash, a shadow copy's comparison with the caller's answer or its prediction log entry, the answer to a request another node forwarded here, the answer a model's default_timeout_ms gives a request, or the answer a request waiting for an on-demand load gets at its deadline (a bug in Grove, a runtime's binding, a bucket client or the cluster's client), by actor (supervisor, router, fetch, load, warm_up, release, config_poll, forward, close, reload, shadow_compare, shadow_log, forward_reply, default_timeout, load_wait): each failed only what it was handling (that call, that model's load, that poll, that forwarded request or shadow copy, that close, that reload: the model is loaded afresh, that comparison: the copy is logged uncompared, that log entry: dropped, or that answer: the internal error if it was not sent yet, or that request's answer: the internal error), logged at error level with its stack; the actor kept its state and every model kept serving.",
		}, []string{"actor"}),
		shadowDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grove_shadow_dropped_total",
			Help: "Shadow copies not run, by model path and reason (overloaded: the model's queue already held its share of shadow work; busy: the low-priority shadow worker and its queue were full; not_found).",
		}, []string{"model", "reason"}),
		lowCPU: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grove_low_priority_cpu_seconds_total",
			Help: "CPU time of the work Grove runs on lowered threads, by work (load: a runtime's model loads and warm-up forward calls, at nice 5; shadow: shadow forward calls and their comparisons and logs, on the shadow workers at nice 19). It counts the lowered thread alone, not threads its C code starts (a forward call's OpenMP pool), nor the fetch and checksum of a load, which run at normal priority. Linux only.",
		}, []string{"work"}),
		compareShed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grove_shadow_comparisons_shed_total",
			Help: "Shadow executions logged without being compared with the caller's answer, by model path: the champion answered after the shadow copy and the low-priority workers' queue was full, or the comparison panicked (a bug, counted in grove_actor_panics_total{actor=\"shadow_compare\"}).",
		}, []string{"model"}),
		expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grove_requests_expired_total",
			Help: "Requests dropped without running, by model path and reason (deadline: the deadline passed or would pass before the answer; canceled: the caller went away; queue_timeout: waited longer than queue_timeout_ms). Shadow copies past shadow_timeout count as deadline.",
		}, []string{"model", "reason"}),
		late: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grove_requests_late_total",
			Help: "User requests a model answered after their deadline, by model path: started in time, they ran past it. Their answer was thrown away (their caller had been answered at its deadline, or had gone away), or, for a request run on its caller's goroutine whose forward call took far longer than its model's recent calls, delivered late.",
		}, []string{"model"}),
		restores: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grove_model_restores_total",
			Help: "Kept previous contents put back into service with no reload (a rollback to them), by model path.",
		}, []string{"model"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grove_release_decisions_total",
			Help: "Decisions of the release gates taken by this replica, by contract, release and decision (promoted: promote_when held; rolled_back: rollback_when failed the release while it phased in).",
		}, []string{"contract", "release", "decision"}),
		routerShare: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "grove_router_share",
			Help: "The share of a contract's user traffic its bandit router (thompson, epsilon_greedy) chose for each release at its last update, by contract and release (0: not eligible, or no share).",
		}, []string{"contract", "release"}),
		forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "grove_cluster_forwarded_total",
			Help: "Requests (user and shadow) this cluster node forwarded to another node that has the model ready, by model path and result (the outcomes of grove_model_requests_total). A forwarded request counts in the per-model metrics (grove_model_*) of the node that ran it only.",
		}, []string{"model", "result"}),
		forwardTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "grove_cluster_forward_duration_seconds",
			Help:    "Time from handing a request (user or shadow: api suffixed -shadow) to another cluster node to its answer, by API, on the node that forwarded it; the serving node counts the request in grove_model_requests_total and grove_model_request_duration_seconds.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"api"}),
		batched: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "grove_model_batched_requests_total",
			Help: "User requests answered by a forward call shared with other requests (dynamic batching).",
		}),
		reconciles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "grove_reconciles_total",
			Help: "Reconciliations of the served models against the model config.",
		}),
		configErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "grove_config_errors_total",
			Help: "Model config polls whose file could not be read, parsed or validated; the previous config stayed in force.",
		}),
	}
	for _, a := range []string{"supervisor", "router", "fetch", "config_poll", "warm_up", "load", "release", "forward", "close", "reload", "shadow_compare", "shadow_log", "forward_reply", "default_timeout", "load_wait"} {
		m.panics.WithLabelValues(a) // exported at 0 before the first
	}
	for _, w := range []string{"load", "shadow"} {
		m.lowCPU.WithLabelValues(w)
	}
	reg.MustRegister(m.requests, m.latency, m.configPolls, m.loads, m.unloads, m.coldStart, m.demandHits, m.demandMisses, m.diskCacheHits, m.diskCacheInvalid, m.diskCacheBytes, m.crashes, m.panics, m.shadowDropped, m.lowCPU, m.compareShed, m.expired, m.late, m.restores, m.decisions, m.routerShare, m.forwarded, m.forwardTime, m.batched, m.reconciles, m.configErrors)
	return m
}

// observe counts a request of api for model that ended with err after
// took, in grove_model_requests_total and
// grove_model_request_duration_seconds (not for a model not found).
func (m *Metrics) observe(api, model string, err error, took time.Duration) {
	outcome := outcomeOf(err)
	if outcome == "not_found" {
		model = ""
	} else {
		m.latency.WithLabelValues(api, model).Observe(took.Seconds())
	}
	m.requests.WithLabelValues(api, model, outcome).Inc()
}

// okSeries are the series of a content's successful requests of one API
// (content.observe).
type okSeries struct {
	latency  prometheus.Observer
	requests prometheus.Counter
}

// observe is m.observe for a request of api that c answered: a success
// counts in series c resolved once per API (okSeries) rather than looked
// up by their labels each time.
func (c *content) observe(m *Metrics, api string, err error, took time.Duration) {
	if err != nil {
		m.observe(api, c.path, err, took)
		return
	}
	s, ok := c.okSeriesOf(api)
	if !ok {
		s = okSeries{latency: m.latency.WithLabelValues(api, c.path), requests: m.requests.WithLabelValues(api, c.path, "ok")}
		c.addOKSeries(api, s)
	}
	s.latency.Observe(took.Seconds())
	s.requests.Inc()
}

// okSeriesOf returns the series of c's successful requests of api, if
// resolved already.
func (c *content) okSeriesOf(api string) (okSeries, bool) {
	if p := c.okSeries.Load(); p != nil {
		s, ok := (*p)[api]
		return s, ok
	}
	return okSeries{}, false
}

// addOKSeries publishes s as the series of c's successful requests of
// api: a copy of the map with it, replacing the one that was read.
func (c *content) addOKSeries(api string, s okSeries) {
	for {
		old := c.okSeries.Load()
		next := map[string]okSeries{api: s}
		if old != nil {
			for k, v := range *old {
				next[k] = v
			}
		}
		if c.okSeries.CompareAndSwap(old, &next) {
			return
		}
	}
}

// outcomeOf is the outcome label of a request that ended with err.
func outcomeOf(err error) string {
	switch k := servables.KindOf(err); k {
	case servables.OK:
		return "ok"
	case servables.InvalidInput:
		return "input_error"
	case servables.OutputUnsupported:
		return "output_error"
	case servables.Execution:
		return "execution_error"
	default:
		return k.String()
	}
}

// stateCollector exports per-model gauges read from the live status and
// routing table at scrape time, so the request path pays nothing for them.
type stateCollector struct {
	s          *System
	state      *prometheus.Desc
	queue      *prometheus.Desc
	inflight   *prometheus.Desc
	configTime *prometheus.Desc
	ready      *prometheus.Desc
	keptBytes  *prometheus.Desc
	budget     *prometheus.Desc
	used       *prometheus.Desc
}

func newStateCollector(s *System) *stateCollector {
	return &stateCollector{
		s:          s,
		state:      prometheus.NewDesc("grove_model_state", "1 for the state each configured model is in (loading, ready, failed, evicting, expiring, expired; and unloaded, for on-demand models only).", []string{"model", "state"}, nil),
		budget:     prometheus.NewDesc("grove_memory_budget_bytes", "memory_budget_bytes of a single server (0: unbounded); exported with on-demand models or a budget.", nil, nil),
		used:       prometheus.NewDesc("grove_memory_used_bytes", "Memory the loaded models (and the load running) are counted at against memory_budget_bytes: each its measured growth at load, else its size times the memory factor; exported with on-demand models or a budget.", nil, nil),
		queue:      prometheus.NewDesc("grove_model_queue_depth", "Requests waiting in the model actor's mailbox.", []string{"model"}, nil),
		inflight:   prometheus.NewDesc("grove_model_inflight", "Requests dispatched to the model and not yet answered.", []string{"model"}, nil),
		configTime: prometheus.NewDesc("grove_config_last_success_timestamp_seconds", "When the model config was last read and applied.", nil, nil),
		ready:      prometheus.NewDesc("grove_ready", "1 once the first reconcile has finished and the server is not draining.", nil, nil),
		keptBytes: prometheus.NewDesc("grove_model_kept_bytes", "Size in bytes of the files of each model's previous content kept loaded out of service for an instant rollback "+
			"(keep_previous_for); 0 when none is kept. The memory it holds is about as much, plus the runtime's overhead.", []string{"model"}, nil),
	}
}

// Describe sends the descriptors of the collected metrics.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.state
	ch <- c.queue
	ch <- c.inflight
	ch <- c.configTime
	ch <- c.ready
	ch <- c.keptBytes
	ch <- c.budget
	ch <- c.used
}

// Collect reads the current status and routing table.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.s.Status()
	for _, m := range st.Models {
		states := []State{StateLoading, StateReady, StateFailed, StateEvicting, StateExpiring, StateExpired}
		if m.OnDemand {
			states = append(states, StateUnloaded)
		}
		for _, s := range states {
			v := 0.0
			if m.State == s {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, m.Path, string(s))
		}
		var kept float64
		if m.Kept != nil {
			kept = float64(m.Kept.SizeBytes)
		}
		ch <- prometheus.MustNewConstMetric(c.keptBytes, prometheus.GaugeValue, kept, m.Path)
	}
	for path, ct := range *c.s.routes.Load() {
		if ct.path != path {
			continue // a versioned entry's path: its version's content is counted under its own
		}
		ch <- prometheus.MustNewConstMetric(c.queue, prometheus.GaugeValue, float64(ct.queued.Load()+ct.shadowQueued.Load()), path)
		ch <- prometheus.MustNewConstMetric(c.inflight, prometheus.GaugeValue, float64(ct.inflight.Load()), path)
	}
	if mem := st.Memory; mem != nil {
		ch <- prometheus.MustNewConstMetric(c.budget, prometheus.GaugeValue, float64(mem.BudgetBytes))
		ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(mem.UsedBytes))
	}
	if st.Config.LastSuccess != nil {
		ch <- prometheus.MustNewConstMetric(c.configTime, prometheus.GaugeValue, float64(st.Config.LastSuccess.UnixNano())/1e9)
	}
	ready := 0.0
	if c.s.Ready() {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(c.ready, prometheus.GaugeValue, ready)
}
