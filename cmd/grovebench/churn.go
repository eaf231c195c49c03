package main

// The churn scenario measures "a model updated in place hundreds of times
// under load must leave RSS flat after warm-up". A grove of its own serves
// pctr_v1/ (TorchScript) and pctr_onnx/ (ONNX Runtime) under a steady
// closed-loop load on both (batch 1, --churn-conc clients each). Each
// update writes new content for both models into the bucket (the
// TorchScript file alternating between the v1 and v2 weights, and beside
// each model a file churn.txt holding the update's number, so that every
// update is a content with a checksum never seen before) and then the
// config with the two new checksums; the supervisor's next poll fetches,
// loads, warms up and swaps them in. Once /v1/status serves both new
// checksums and the replaced contents' grace period has passed, grovebench
// samples the process: VmRSS, RssAnon and RssFile, threads and open files
// from /proc, the Go runtime's memory and goroutines and the number of
// series from /metrics, and the entries of the model cache directory.
//
// After the first --churn-warmup updates, a least-squares line through the
// samples over the update number gives what each update leaves behind (the
// slope, with its standard error); the same line through Go's figures
// tells Go memory from the rest (C++ runtimes, the C allocator): Go's
// mapped memory is go_memstats_sys_bytes minus go_memstats_heap_released_bytes,
// and what RSS holds beyond it is not Go's. The line through glibc's own
// accounting (grove_c_heap_inuse_bytes and grove_c_heap_free_bytes, from
// mallinfo2) tells a C or C++ leak (in use grows) from memory malloc
// keeps free (fragmentation, retention).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/groveml/grove/conf/bucket"
)

const (
	// scenarioChurn names the scenario in --scenarios.
	scenarioChurn = "churn"
	// churnGraceMs is the replaced contents' grace period: they serve the
	// requests already sent to them, then are released before the next
	// update.
	churnGraceMs = 200
	// churnSerialFile is the file beside each model that makes every
	// update's checksum new.
	churnSerialFile = "churn.txt"
	// churnFlatTarget is the target: what RSS keeps per update (the slope
	// after the warm-up) at most this many bytes, or not distinguishable
	// from zero (within two standard errors).
	churnFlatTarget = 4 << 10
)

// churnSample is the process's state after one update.
type churnSample struct {
	Update int `json:"update"`
	// At is when the sample was taken, since the first update was written.
	At time.Duration `json:"at_ns"`
	// RSS, RSSAnon and RSSFile are /proc/PID/status's VmRSS, RssAnon and
	// RssFile in bytes.
	RSS     int64 `json:"rss"`
	RSSAnon int64 `json:"rss_anon"`
	RSSFile int64 `json:"rss_file"`
	Threads int   `json:"threads"`
	FDs     int   `json:"fds"`
	// GoHeapInuse, GoSys and GoReleased are go_memstats_heap_inuse_bytes,
	// go_memstats_sys_bytes and go_memstats_heap_released_bytes.
	GoHeapInuse int64 `json:"go_heap_inuse"`
	GoSys       int64 `json:"go_sys"`
	GoReleased  int64 `json:"go_released"`
	Goroutines  int   `json:"goroutines"`
	// CInuse, CFree and CMmapped are grove_c_heap_inuse_bytes,
	// grove_c_heap_free_bytes and grove_c_heap_mmapped_bytes: what C and
	// C++ code holds malloc'd, what malloc keeps free, and the share of
	// the first in mappings of their own.
	CInuse   int64 `json:"c_inuse"`
	CFree    int64 `json:"c_free"`
	CMmapped int64 `json:"c_mmapped"`
	// Series is the number of samples /metrics served.
	Series int `json:"series"`
	// CacheEntries is the number of files and directories under the model
	// cache directory.
	CacheEntries int `json:"cache_entries"`
}

// goMapped is the memory Go's runtime holds from the OS and has not
// returned: an upper bound of Go's share of RSS.
func (s churnSample) goMapped() int64 { return s.GoSys - s.GoReleased }

// linearFit is a least-squares line y = Intercept + Slope·x.
type linearFit struct {
	N         int     `json:"n"`
	Slope     float64 `json:"slope"`
	Intercept float64 `json:"intercept"`
	// SlopeSE is the slope's standard error; ResidSD the residuals'
	// standard deviation (the samples' spread around the line).
	SlopeSE float64 `json:"slope_se"`
	ResidSD float64 `json:"resid_sd"`
}

// fitLine fits a line through the points (xs[i], ys[i]); it needs at least
// three points with two different xs (ok false otherwise).
func fitLine(xs, ys []float64) (f linearFit, ok bool) {
	n := len(xs)
	if n < 3 || len(ys) != n {
		return f, false
	}
	var mx, my float64
	for i := range xs {
		mx += xs[i]
		my += ys[i]
	}
	mx /= float64(n)
	my /= float64(n)
	var sxx, sxy float64
	for i := range xs {
		sxx += (xs[i] - mx) * (xs[i] - mx)
		sxy += (xs[i] - mx) * (ys[i] - my)
	}
	if sxx == 0 {
		return f, false
	}
	f.N = n
	f.Slope = sxy / sxx
	f.Intercept = my - f.Slope*mx
	var ss float64
	for i := range xs {
		r := ys[i] - (f.Intercept + f.Slope*xs[i])
		ss += r * r
	}
	f.ResidSD = math.Sqrt(ss / float64(n-2))
	f.SlopeSE = f.ResidSD / math.Sqrt(sxx)
	return f, true
}

// churnFits are the lines through the samples after the warm-up.
type churnFits struct {
	RSS     linearFit `json:"rss"`
	RSSAnon linearFit `json:"rss_anon"`
	GoHeap  linearFit `json:"go_heap_inuse"`
	// GoMapped is Go's mapped memory (sys - released); NonGo is RSS
	// minus it: the C++ runtimes, the C allocator, the files mapped.
	GoMapped linearFit `json:"go_mapped"`
	NonGo    linearFit `json:"non_go"`
	// CInuse and CFree are the C heap's bytes in use and kept free.
	CInuse linearFit `json:"c_inuse"`
	CFree  linearFit `json:"c_free"`
	// RSSLate is RSS over the second half of the samples after the
	// warm-up alone: a leak keeps its slope, a warm-up that ends late
	// flattens it.
	RSSLate linearFit `json:"rss_late"`
}

// fitChurn fits the lines through the samples of updates after warmup.
func fitChurn(samples []churnSample, warmup int) (churnFits, bool) {
	var after []churnSample
	for _, s := range samples {
		if s.Update > warmup {
			after = append(after, s)
		}
	}
	fit := func(ss []churnSample, y func(churnSample) int64) linearFit {
		xs, ys := make([]float64, len(ss)), make([]float64, len(ss))
		for i, s := range ss {
			xs[i], ys[i] = float64(s.Update), float64(y(s))
		}
		f, _ := fitLine(xs, ys)
		return f
	}
	var f churnFits
	f.RSS = fit(after, func(s churnSample) int64 { return s.RSS })
	if f.RSS.N == 0 {
		return f, false
	}
	f.RSSAnon = fit(after, func(s churnSample) int64 { return s.RSSAnon })
	f.GoHeap = fit(after, func(s churnSample) int64 { return s.GoHeapInuse })
	f.GoMapped = fit(after, churnSample.goMapped)
	f.NonGo = fit(after, func(s churnSample) int64 { return s.RSS - s.goMapped() })
	f.CInuse = fit(after, func(s churnSample) int64 { return s.CInuse })
	f.CFree = fit(after, func(s churnSample) int64 { return s.CFree })
	f.RSSLate = fit(after[len(after)/2:], func(s churnSample) int64 { return s.RSS })
	return f, true
}

// churnReport is what the churn scenario measured.
type churnReport struct {
	// Updates is the number of updates done (each replaced both models),
	// Warmup those left out of the fits, Conc the clients per model.
	Updates int `json:"updates"`
	Warmup  int `json:"warmup_updates"`
	Conc    int `json:"concurrency_per_model"`
	// Elapsed is the time from the first update's write to the last one
	// served; UpdatesPerSec is Updates over it.
	Elapsed       time.Duration `json:"elapsed_ns"`
	UpdatesPerSec float64       `json:"updates_per_sec"`
	// UpdateP50 and UpdateMax are the time from writing an update's
	// config to /v1/status serving both new checksums.
	UpdateP50 time.Duration `json:"update_p50_ns"`
	UpdateMax time.Duration `json:"update_max_ns"`
	// Sent and Failed are the requests of the load on both models.
	Sent       int     `json:"sent"`
	Failed     int     `json:"failed"`
	FirstError string  `json:"first_error,omitempty"`
	ReqPerSec  float64 `json:"req_per_sec"`
	// Start is the sample before the first update; Samples one per update.
	Start   churnSample   `json:"start"`
	Samples []churnSample `json:"samples"`
	Fits    churnFits     `json:"fits"`
	Met     bool          `json:"met_target"`
	Error   string        `json:"error,omitempty"`
}

// The runtimes the churn scenario can update, in --churn-runtimes.
const (
	churnTorch = "torchscript"
	churnONNX  = "onnx"
)

// churnEnv is what the churn scenario needs beyond lifecycleEnv: the
// updates, those left out of the fits, the clients per model, and the
// runtimes whose model each update replaces (the other model is loaded
// and loaded with requests all the same).
type churnEnv struct {
	updates, warmup, conc int
	runtimes              map[string]bool
}

// parseChurnRuntimes parses --churn-runtimes: a comma-separated subset of
// torchscript and onnx, not empty.
func parseChurnRuntimes(spec string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, f := range strings.Split(spec, ",") {
		switch r := strings.ToLower(strings.TrimSpace(f)); r {
		case churnTorch, churnONNX:
			out[r] = true
		case "":
		default:
			return nil, fmt.Errorf("--churn-runtimes: unknown runtime %q (want %s, %s or both)", f, churnTorch, churnONNX)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--churn-runtimes: none given (want %s, %s or both)", churnTorch, churnONNX)
	}
	return out, nil
}

// runChurn runs the churn scenario.
func runChurn(ctx context.Context, e lifecycleEnv, c churnEnv) *churnReport {
	rep := &churnReport{Warmup: c.warmup, Conc: c.conc}
	fail := func(format string, a ...any) *churnReport {
		rep.Error = fmt.Sprintf(format, a...)
		return rep
	}
	var torch [2][]byte
	for i, name := range []string{"pctr_v1", "pctr_v2"} {
		b, err := os.ReadFile(filepath.Join(e.examples, name, "model.pt"))
		if err != nil {
			return fail("%v", err)
		}
		torch[i] = b
	}
	onnx, err := os.ReadFile(filepath.Join(e.examples, onnxPath, "model.onnx"))
	if err != nil {
		return fail("%v", err)
	}
	dir := filepath.Join(e.dir, "bucket-churn")
	cache := filepath.Join(e.dir, "cache-churn")
	warm := func(path string) string { return string(groveBodyFor(path, e.rows[:1])) }
	entries := []configEntry{
		{Path: modelPath, WarmUp: warm(modelPath), GraceMs: churnGraceMs},
		{Path: onnxPath, WarmUp: warm(onnxPath), GraceMs: churnGraceMs},
	}
	// put writes update n's content for both models, then the config
	// naming their checksums.
	models := []struct {
		runtime, path, file string
		data                func(n int) []byte
	}{
		{churnTorch, modelPath, "model.pt", func(n int) []byte { return torch[n%2] }},
		{churnONNX, onnxPath, "model.onnx", func(int) []byte { return onnx }},
	}
	put := func(n int) error {
		serial := []byte(strconv.Itoa(n) + "\n")
		for i, m := range models {
			if n > 0 && !c.runtimes[m.runtime] {
				continue
			}
			mdir := filepath.Join(dir, m.path)
			if err := writeFileAtomic(filepath.Join(mdir, m.file), m.data(n)); err != nil {
				return err
			}
			if err := writeFileAtomic(filepath.Join(mdir, churnSerialFile), serial); err != nil {
				return err
			}
			sum, err := checksumDir(mdir)
			if err != nil {
				return err
			}
			entries[i].Checksum = sum
		}
		return writeConfig(dir, entries...)
	}
	if err := put(0); err != nil {
		return fail("writing the churn bucket: %v", err)
	}
	g, ep, err := startGrove(ctx, "grove (churn)", e.bin, dir, cache, filepath.Join(e.dir, "grove-churn.log"), e.groveArgs, e.startTimeout)
	if g != nil {
		defer g.stop()
	}
	if err != nil {
		return fail("starting grove: %v", err)
	}
	pid := g.cmd.Process.Pid
	oep := groveEndpointFor("grove (churn)", ep.baseURL)
	oep.rowsBody = func(rows [][]float64) []byte { return groveBodyFor(onnxPath, rows) }
	for _, x := range []*endpoint{ep, oep} {
		if err := checkAnswer(ctx, x, e.rows, e.want, e.timeout); err != nil {
			return fail("check request: %v", err)
		}
	}
	client := &http.Client{Timeout: 5 * time.Second}
	sample := func(n int, at time.Duration) (churnSample, error) {
		s := churnSample{Update: n, At: at}
		if err := readProcSample(pid, &s); err != nil {
			return s, err
		}
		p, err := fetchProm(ctx, client, ep.baseURL)
		if err != nil {
			return s, err
		}
		s.GoHeapInuse = int64(p.sum("go_memstats_heap_inuse_bytes", nil))
		s.GoSys = int64(p.sum("go_memstats_sys_bytes", nil))
		s.GoReleased = int64(p.sum("go_memstats_heap_released_bytes", nil))
		s.Goroutines = int(p.sum("go_goroutines", nil))
		s.CInuse = int64(p.sum("grove_c_heap_inuse_bytes", nil))
		s.CFree = int64(p.sum("grove_c_heap_free_bytes", nil))
		s.CMmapped = int64(p.sum("grove_c_heap_mmapped_bytes", nil))
		s.Series = len(p)
		s.CacheEntries, err = countEntries(cache)
		return s, err
	}

	// The load: both models, until the updates are done.
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	var wg sync.WaitGroup
	results := make([]loadResult, 2)
	loadStart := time.Now()
	for i, path := range []string{modelPath, onnxPath} {
		spec := loadSpec{url: ep.url, body: groveBodyFor(path, e.rows[:1]), okMarker: ep.okMarker, errMarker: ep.errMarker,
			batch: 1, conc: c.conc, duration: 24 * time.Hour, timeout: e.timeout}
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = runLoad(loadCtx, spec)
		}()
	}
	var took []time.Duration // from writing each update's config to both serving
	endLoad := func() {
		stopLoad()
		wg.Wait()
		for _, r := range results {
			rep.Sent += r.Sent
			rep.Failed += r.Errors
			if rep.FirstError == "" {
				rep.FirstError = r.FirstError
			}
		}
		rep.ReqPerSec = float64(rep.Sent) / time.Since(loadStart).Seconds()
		if rep.Elapsed > 0 {
			rep.UpdatesPerSec = float64(rep.Updates) / rep.Elapsed.Seconds()
		}
		if len(took) > 0 {
			sorted := append([]time.Duration(nil), took...)
			slices.Sort(sorted)
			rep.UpdateP50, rep.UpdateMax = percentile(sorted, 50), sorted[len(sorted)-1]
		}
	}
	e.logf("churn: %d in-place updates of %s and %s under load (batch 1, c %d on each), fit after %d", c.updates, modelPath, onnxPath, c.conc, c.warmup)
	if !sleepUntil(ctx, time.Now().Add(2*time.Second)) {
		endLoad()
		return rep
	}
	if rep.Start, err = sample(0, 0); err != nil {
		endLoad()
		return fail("sampling: %v", err)
	}
	start := time.Now()
	for n := 1; n <= c.updates && ctx.Err() == nil; n++ {
		if err := put(n); err != nil {
			endLoad()
			return fail("update %d: %v", n, err)
		}
		wrote := time.Now()
		want := map[string]string{}
		for i, m := range models {
			if c.runtimes[m.runtime] {
				want[m.path] = entries[i].Checksum
			}
		}
		if _, err := waitStatus(ctx, client, ep.baseURL, time.Minute, fmt.Sprintf("update %d served", n), func(ms []statusModel) bool {
			served := 0
			for _, m := range ms {
				if m.State == "ready" && want[m.Path] == m.Checksum {
					served++
				}
			}
			return served == len(want)
		}); err != nil {
			endLoad()
			return fail("%v", err)
		}
		took = append(took, time.Since(wrote))
		// The replaced contents serve out their grace period and go.
		if !sleepUntil(ctx, time.Now().Add(churnGraceMs*time.Millisecond+100*time.Millisecond)) {
			break
		}
		s, err := sample(n, time.Since(start))
		if err != nil {
			endLoad()
			return fail("sampling after update %d: %v", n, err)
		}
		rep.Samples = append(rep.Samples, s)
		rep.Updates = n
		rep.Elapsed = time.Since(start)
		if n%20 == 0 || n == c.updates {
			e.logf("churn: update %d: RSS %s, Go heap in use %s, C heap in use %s (free %s), %d goroutines, %d threads, %d files",
				n, fmtBytes(s.RSS), fmtBytes(s.GoHeapInuse), fmtBytes(s.CInuse), fmtBytes(s.CFree), s.Goroutines, s.Threads, s.FDs)
		}
	}
	endLoad()
	if ctx.Err() != nil {
		return rep
	}
	fits, ok := fitChurn(rep.Samples, c.warmup)
	if !ok {
		return fail("%d updates: too few after the %d warm-up updates to fit a line", rep.Updates, c.warmup)
	}
	rep.Fits = fits
	rep.Met = rep.Failed == 0 && rep.flat()
	e.logf("churn: %d updates, %.2f/s; RSS %+.1f ± %.1f KiB per update after %d (Go heap %+.1f KiB, non-Go %+.1f KiB, C heap in use %+.1f KiB, C heap free %+.1f KiB); %d of %d requests failed",
		rep.Updates, rep.UpdatesPerSec, fits.RSS.Slope/1024, fits.RSS.SlopeSE/1024, c.warmup, fits.GoHeap.Slope/1024, fits.NonGo.Slope/1024,
		fits.CInuse.Slope/1024, fits.CFree.Slope/1024, rep.Failed, rep.Sent)
	return rep
}

// failed is the number of failed requests (0 for a nil report).
func (r *churnReport) failed() int {
	if r == nil {
		return 0
	}
	return r.Failed
}

// flat reports whether RSS stayed flat after the warm-up: its slope is at
// most churnFlatTarget per update or within two standard errors of zero.
func (r *churnReport) flat() bool {
	f := r.Fits.RSS
	return f.N > 0 && (f.Slope <= churnFlatTarget || f.Slope <= 2*f.SlopeSE)
}

// checksumDir is grove's checksum of a model directory's files.
func checksumDir(dir string) (string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	files := map[string][]byte{}
	for _, e := range ents {
		if !e.Type().IsRegular() || strings.HasSuffix(e.Name(), ".upload") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", err
		}
		files[e.Name()] = b
	}
	return bucket.Checksum(files)
}

// countEntries counts the files and directories under dir. One removed
// while it looks (grove releasing a content) is not counted.
func countEntries(dir string) (int, error) {
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil && p != dir && errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		case p != dir:
			n++
		}
		return nil
	})
	return n, err
}

// readProcSample fills in s's figures from /proc/PID: status (VmRSS,
// RssAnon, RssFile, Threads) and the entries of fd.
func readProcSample(pid int, s *churnSample) error {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err
	}
	for _, f := range []struct {
		key string
		dst *int64
	}{{"VmRSS", &s.RSS}, {"RssAnon", &s.RSSAnon}, {"RssFile", &s.RSSFile}} {
		if *f.dst, err = statusKB(status, f.key); err != nil {
			return err
		}
	}
	th, err := statusField(status, "Threads")
	if err != nil {
		return err
	}
	if s.Threads, err = strconv.Atoi(th); err != nil {
		return fmt.Errorf("Threads %q: %v", th, err)
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return err
	}
	s.FDs = len(fds)
	return nil
}

// statusField returns the value of key in /proc/PID/status text.
func statusField(status []byte, key string) (string, error) {
	for line := range bytes.Lines(status) {
		if rest, ok := bytes.CutPrefix(line, []byte(key+":")); ok {
			return string(bytes.TrimSpace(rest)), nil
		}
	}
	return "", fmt.Errorf("no %s line", key)
}

// statusKB returns a "NNN kB" field of /proc/PID/status text in bytes.
func statusKB(status []byte, key string) (int64, error) {
	v, err := statusField(status, key)
	if err != nil {
		return 0, err
	}
	f := strings.Fields(v)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("unexpected %s value %q", key, v)
	}
	kb, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s %q: %v", key, f[0], err)
	}
	return kb << 10, nil
}

// fmtKiB renders a byte count (a slope) in KiB with its sign.
func fmtKiB(v float64) string { return fmt.Sprintf("%+.1f KiB", v/1024) }

func (r *churnReport) writeMarkdown(w io.Writer) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\nChurn: %s (TorchScript) and %s (ONNX Runtime) updated in place together under load (POST /v1/inference, batch 1, c %d on each; every update a new checksum, grace %d ms):\n\n",
		modelPath, onnxPath, r.Conc, churnGraceMs)
	if len(r.Samples) > 0 {
		last := r.Samples[len(r.Samples)-1]
		first := last
		for _, s := range r.Samples {
			if s.Update > r.Warmup {
				first = s
				break
			}
		}
		fmt.Fprintf(w, "- Churn: %d updates in %s, %.2f updates/s (config write to both serving: p50 %s, max %s); %d of %d requests failed, %s req/s\n",
			r.Updates, r.Elapsed.Round(time.Second), r.UpdatesPerSec, fmtDur(r.UpdateP50), fmtDur(r.UpdateMax), r.Failed, r.Sent, fmtRate(r.ReqPerSec))
		fmt.Fprintf(w, "- Churn: from update %d to %d: RSS %s → %s, Go heap in use %s → %s, C heap in use %s → %s (free %s → %s), goroutines %d → %d, threads %d → %d, open files %d → %d, metric series %d → %d, cache entries %d → %d\n",
			first.Update, last.Update, fmtBytes(first.RSS), fmtBytes(last.RSS), fmtBytes(first.GoHeapInuse), fmtBytes(last.GoHeapInuse),
			fmtBytes(first.CInuse), fmtBytes(last.CInuse), fmtBytes(first.CFree), fmtBytes(last.CFree),
			first.Goroutines, last.Goroutines, first.Threads, last.Threads, first.FDs, last.FDs, first.Series, last.Series, first.CacheEntries, last.CacheEntries)
	}
	if f := r.Fits; f.RSS.N > 0 {
		verdict := "met"
		if !r.Met {
			verdict = "MISSED"
		}
		fmt.Fprintf(w, "- Churn: per update after %d (line through %d samples, ± standard error; spread = residual SD): RSS %s ± %.1f (spread %s), second half %s ± %.1f; RssAnon %s ± %.1f; Go heap in use %s ± %.1f; Go mapped %s ± %.1f; RSS beyond Go's %s ± %.1f; C heap in use %s ± %.1f, C heap free %s ± %.1f KiB (target: RSS ≤ %s per update or within 2 SE of 0, 0 failed): %s\n",
			r.Warmup, f.RSS.N, fmtKiB(f.RSS.Slope), f.RSS.SlopeSE/1024, fmtBytes(int64(f.RSS.ResidSD)), fmtKiB(f.RSSLate.Slope), f.RSSLate.SlopeSE/1024,
			fmtKiB(f.RSSAnon.Slope), f.RSSAnon.SlopeSE/1024, fmtKiB(f.GoHeap.Slope), f.GoHeap.SlopeSE/1024, fmtKiB(f.GoMapped.Slope), f.GoMapped.SlopeSE/1024,
			fmtKiB(f.NonGo.Slope), f.NonGo.SlopeSE/1024, fmtKiB(f.CInuse.Slope), f.CInuse.SlopeSE/1024, fmtKiB(f.CFree.Slope), f.CFree.SlopeSE/1024,
			fmtKiB(churnFlatTarget), verdict)
	}
	if r.FirstError != "" {
		fmt.Fprintf(w, "- Churn: first failure: %s\n", r.FirstError)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "- Churn scenario FAILED: %s\n", r.Error)
	}
}
