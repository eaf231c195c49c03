// Package console serves Grove's web console: the page under /ui/ (the
// assets package ui embeds, open to everyone: it holds no data) and the
// one JSON document it polls, GET /v1/console (role read), which gathers
// what the page shows: the status document, each contract's servables
// with their traffic share, shadow executions, champion-challenger
// comparison and outcome figures (with the history of those the server
// keeps: actors.ServableStats.Outcomes), and short histories sampled
// every interval: each model's
// req/s, p50/p99 latency, queue depth, and each contract release's share
// and phase-in.
//
// Who owns what: the Console's histories are written by its sampling
// loop (Run) and read by the handler, both under Console.mu; everything
// else it reads from the Source and the Gatherer when asked.
package console

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/routing"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/transport/httpserver"
)

// API is the label the console's routes are counted under (and the name
// that moves /v1/console to the admin listener, beside Prefix).
const API = "console"

// Prefix is the path the page is mounted at.
const Prefix = "/ui"

// Source is what the console reads about models and contracts;
// *actors.System is one.
type Source interface {
	// Status is a snapshot of the configured models.
	Status() actors.Status
	// Contracts lists the configured contracts; it fails when they
	// cannot be read (an internal error, the server stopping).
	Contracts() ([]modelconfig.Contract, error)
	// ContractStats describes each servable of contract id now.
	ContractStats(id string) ([]actors.ServableStats, error)
	// ContractPlan is contract id's routing plan now (what the share
	// history samples: cheaper than ContractStats, which compares the
	// shadows' answers).
	ContractPlan(id string) (routing.Plan, error)
}

// Options configure a Console.
type Options struct {
	// Source is read for the models and contracts; required.
	Source Source
	// Gatherer has the actors' metrics the model histories are computed
	// from (grove_model_requests_total, _request_duration_seconds,
	// _queue_depth, _inflight); nil keeps no model history.
	Gatherer prometheus.Gatherer
	// Document is the status document /v1/status serves, included whole;
	// nil includes Source.Status().
	Document func() any
	// Assets are the page's files (index.html at the root); nil serves none.
	Assets fs.FS
	// AuthRequired tells the page to ask for a token before its first
	// call: set it when callers authenticate with bearer tokens (a tokens
	// file or JWTs); a browser with a client certificate needs none.
	AuthRequired bool
	// Interval is how often the histories are sampled; 0 means 1 s.
	// Samples is how many they keep; 0 means 180.
	Interval time.Duration
	Samples  int
	// Logger receives sampling failures; nil means slog.Default().
	Logger *slog.Logger
}

// Console samples the histories and serves the page and its document.
type Console struct {
	opts Options

	mu        sync.Mutex
	last      snapshot
	lastAt    time.Time
	models    map[string]*ring[ModelPoint]
	contracts map[string]*ring[ContractPoint]
}

// New returns a Console; call Run to sample its histories.
func New(opts Options) *Console {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.Samples <= 0 {
		opts.Samples = 180
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Console{opts: opts, models: map[string]*ring[ModelPoint]{}, contracts: map[string]*ring[ContractPoint]{}}
}

// Register mounts the page at Prefix and serves GET /v1/console (role
// read) on h, both counted in the HTTP metrics under API. The page is
// open: it holds no data, every figure it shows comes from GET
// /v1/console and the other routes, with the caller's token.
func (c *Console) Register(h *httpserver.Server) {
	h.Mount(Prefix, httpserver.Always(auth.Open), h.Instrument(API, c.pageHandler().ServeHTTP))
	h.SetErrorWriter(API, httpserver.JSONError)
	h.Handle("GET /v1/console", auth.RoleRead, API, c.serveDocument)
}

// Run samples the histories every interval until ctx is done.
func (c *Console) Run(ctx context.Context) {
	t := time.NewTicker(c.opts.Interval)
	defer t.Stop()
	c.Sample(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			c.Sample(now)
		}
	}
}

// ContractPoint is the traffic share and phase-in of each release of a
// contract at one time.
type ContractPoint struct {
	// T is when, Unix milliseconds.
	T int64 `json:"t"`
	// Releases are by release version.
	Releases map[string]ReleasePoint `json:"releases"`
}

// ReleasePoint is one release's part of a ContractPoint.
type ReleasePoint struct {
	// Share is the fraction of the contract's traffic it is given (0-1).
	Share float64 `json:"share"`
	// PhaseInPct is how far its phase-in has gone (0-100).
	PhaseInPct float64 `json:"phase_in_pct"`
}

// Sample adds the figures at now to the histories: each configured
// model's since the last sample, and each contract's release shares.
// Histories of models and contracts no longer configured are dropped; a
// contract whose figures cannot be read now (an internal error) keeps its
// history, with no point added, and so do all of them when the contracts
// cannot be listed.
func (c *Console) Sample(now time.Time) {
	st := c.opts.Source.Status()
	configured := make(map[string]bool, len(st.Models))
	for _, m := range st.Models {
		configured[m.Path] = true
	}
	var snap snapshot
	if c.opts.Gatherer != nil {
		fams, err := c.opts.Gatherer.Gather()
		if err != nil {
			// Gather returns what it could gather with the error.
			c.opts.Logger.Debug("console: gathering metrics", "err", err)
		}
		snap = snapshotOf(fams)
	}
	contracts, err := c.opts.Source.Contracts()
	if err != nil {
		c.opts.Logger.Warn("console: listing contracts; their histories get no point", "err", err)
	}
	points := make(map[string]ContractPoint, len(contracts))
	unread := map[string]bool{} // listed, their figures not read now: kept
	for _, ct := range contracts {
		plan, err := c.opts.Source.ContractPlan(ct.ID())
		if errors.Is(err, actors.ErrUnknownContract) {
			continue // removed since listed
		}
		if err != nil {
			unread[ct.ID()] = true
			continue
		}
		p := ContractPoint{T: now.UnixMilli(), Releases: make(map[string]ReleasePoint, len(plan.Servables))}
		for _, s := range plan.Servables {
			p.Releases[s.Release] = ReleasePoint{Share: s.Fraction, PhaseInPct: s.PhaseInPct}
		}
		points[ct.ID()] = p
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if snap != nil {
		seconds := now.Sub(c.lastAt).Seconds()
		for path, cur := range snap {
			if !configured[path] {
				continue
			}
			r := c.models[path]
			if r == nil {
				r = newRing[ModelPoint](c.opts.Samples)
				c.models[path] = r
			}
			if c.last != nil {
				r.add(pointBetween(c.last[path], cur, seconds, now.UnixMilli()))
			}
		}
		c.last, c.lastAt = snap, now
	}
	for path := range c.models {
		if !configured[path] {
			delete(c.models, path)
		}
	}
	for id, p := range points {
		r := c.contracts[id]
		if r == nil {
			r = newRing[ContractPoint](c.opts.Samples)
			c.contracts[id] = r
		}
		r.add(p)
	}
	if err != nil {
		return // not listed: every history is kept as it is
	}
	for id := range c.contracts {
		if _, ok := points[id]; !ok && !unread[id] {
			delete(c.contracts, id)
		}
	}
}

// Document is what GET /v1/console answers.
type Document struct {
	// Time is when it was made.
	Time time.Time `json:"time"`
	// IntervalMs is the sampling interval of the histories.
	IntervalMs int64 `json:"interval_ms"`
	// Status is the /v1/status document.
	Status any `json:"status"`
	// Contracts are the configured contracts, sorted by id.
	Contracts []ContractView `json:"contracts"`
	// ModelSeries are the models' live figures, oldest first, by model path.
	ModelSeries map[string][]ModelPoint `json:"model_series"`
	// ContractSeries are the contracts' release shares, oldest first, by id.
	ContractSeries map[string][]ContractPoint `json:"contract_series"`
	// CallerRoles are the roles of the caller that asked for it, when the
	// server authenticates callers (absent when it does not): the page
	// calls only the routes they allow (GET /v1/cluster needs manage), so
	// that a read-only token gets no refusal, and the browser logs no
	// error, on every poll.
	CallerRoles []auth.Role `json:"caller_roles,omitempty"`
}

// ContractView is one contract and its servables now.
type ContractView struct {
	ID     string `json:"id"`
	Router string `json:"router,omitempty"`
	// Servables are the servables' stats (actors.System.ContractStats).
	Servables []actors.ServableStats `json:"servables"`
	// Error is why the stats could not be read, if they could not.
	Error string `json:"error,omitempty"`
}

// Document returns the console's document now. It fails when the
// contracts cannot be listed (an internal error, the server stopping):
// a document without them would show them gone.
func (c *Console) Document(now time.Time) (Document, error) {
	d := Document{Time: now, IntervalMs: c.opts.Interval.Milliseconds(), Contracts: []ContractView{},
		ModelSeries: map[string][]ModelPoint{}, ContractSeries: map[string][]ContractPoint{}}
	contracts, err := c.opts.Source.Contracts()
	if err != nil {
		return Document{}, fmt.Errorf("listing contracts: %w", err)
	}
	if c.opts.Document != nil {
		d.Status = c.opts.Document()
	} else {
		d.Status = c.opts.Source.Status()
	}
	for _, ct := range contracts {
		v := ContractView{ID: ct.ID(), Router: string(ct.Router)}
		stats, err := c.opts.Source.ContractStats(ct.ID())
		if err != nil {
			v.Error = err.Error()
		}
		v.Servables = stats
		d.Contracts = append(d.Contracts, v)
	}
	sort.Slice(d.Contracts, func(i, j int) bool { return d.Contracts[i].ID < d.Contracts[j].ID })
	c.mu.Lock()
	defer c.mu.Unlock()
	for path, r := range c.models {
		d.ModelSeries[path] = r.values()
	}
	for id, r := range c.contracts {
		d.ContractSeries[id] = r.values()
	}
	return d, nil
}

// serveDocument serves GET /v1/console: the document, or, when it cannot
// be made, the error with its kind's status (an internal error: 503; the
// page shows it and polls again).
func (c *Console) serveDocument(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	d, err := c.Document(time.Now())
	if err != nil {
		code := http.StatusInternalServerError
		if servables.KindOf(err) == servables.Unavailable {
			code = http.StatusServiceUnavailable
		}
		httpserver.JSONError(w, r, code, err.Error())
		return
	}
	if id, ok := auth.FromContext(r.Context()); ok {
		d.CallerRoles = id.Roles
	}
	httpserver.WriteJSON(w, http.StatusOK, d)
}

// securityHeaders are set on every answer of the page: its scripts,
// styles, images and calls all come from this server, and it is never
// framed.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
		"base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
	"Cache-Control":          "no-cache",
}

// pageHandler serves the page: Prefix redirects to Prefix/, config.json
// tells the page whether to ask for a token, and the other paths are the
// assets. Only GET and HEAD are served.
func (c *Console) pageHandler() http.Handler {
	var files http.Handler = http.NotFoundHandler()
	if c.opts.Assets != nil {
		files = http.StripPrefix(Prefix+"/", http.FileServerFS(c.opts.Assets))
	}
	config := []byte(`{"auth_required":false}` + "\n")
	if c.opts.AuthRequired {
		config = []byte(`{"auth_required":true}` + "\n")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range securityHeaders {
			w.Header().Set(k, v)
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "the console's pages are read with GET", http.StatusMethodNotAllowed)
			return
		}
		switch p := r.URL.Path; {
		case p == Prefix:
			http.Redirect(w, r, Prefix+"/", http.StatusMovedPermanently)
		case p == Prefix+"/config.json":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(config)
		default:
			files.ServeHTTP(w, r)
		}
	})
}
