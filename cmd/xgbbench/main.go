// Command xgbbench compares Grove's XGBoost runtime (servables/xgboost,
// pure Go) with XGBoost's own predictor through its C API (Debian's
// libxgboost-dev: XGBoosterLoadModel, XGBoosterPredictFromDense, nthread
// 1), on the same model files and the same rows, one thread each.
//
//	go run -tags xgbref ./cmd/xgbbench MODEL.json...
//
// `make bench-xgboost` runs it on the two benchmark models
// (servables/xgboost/testdata/make_bench_models.py). Without the xgbref
// tag the program builds without cgo and refuses to run.
//
// The rows are random normal features with one value in ten missing
// (NaN), the same on every run; each call gets the next batch of rows
// from a cycle of -rows, so that neither predictor sees one input's paths
// through the trees over and over. Before timing, every batch of the cycle
// is predicted by both and the outputs compared, the prediction (after the
// objective's transform) and the margin, within 1e-6 · max(1, |xgboost's|):
// a disagreement stops the program with an error, so the table never
// compares different things. The timing then alternates the two
// predictors over -rounds rounds of -round each (the order swapped every
// round) and reports the median time per call of each: Grove's is a
// whole Predict of the servable (input checks, outputs allocated), as a
// request runs it; XGBoost's a XGBoosterPredictFromDense on input already
// in C memory, its array interface written once and a proxy DMatrix made
// once, so that XGBoost is charged for nothing but its own call.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/xgboost"
)

// The targets, as ratios of Grove's time per call to XGBoost's:
// faster at batch 1 and 16, within 1.2x at 256.
var targets = map[int]float64{1: 1, 16: 1, 256: 1.2}

func main() {
	batches := flag.String("batches", "1,16,256", "batch sizes (rows per call), comma-separated")
	rows := flag.Int("rows", 4096, "distinct rows the calls cycle through")
	rounds := flag.Int("rounds", 7, "rounds per model and batch size, each timing both predictors")
	round := flag.Duration("round", 150*time.Millisecond, "how long each predictor runs in a round")
	threads := flag.Int("grove-threads", 1, "Grove's intra_op_threads (XGBoost always has nthread 1)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: xgbbench [flags] MODEL.json...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	cfg := config{rows: *rows, rounds: *rounds, round: *round, threads: *threads}
	var err error
	if cfg.batches, err = parseBatches(*batches); err != nil {
		fmt.Fprintln(os.Stderr, "xgbbench:", err)
		os.Exit(2)
	}
	if flag.NArg() == 0 || cfg.rows < 1 || cfg.rounds < 1 || cfg.round <= 0 || cfg.threads < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(os.Stdout, cfg, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "xgbbench:", err)
		os.Exit(1)
	}
}

type config struct {
	batches []int
	rows    int
	rounds  int
	round   time.Duration
	threads int
}

func parseBatches(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-batches: %q is not a positive number of rows", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// result is one line of the table.
type result struct {
	model string
	batch int
	// grove and xgb are each predictor's times per call, the medians over
	// the rounds.
	grove, xgb timing
	// ratio is the median over the rounds of Grove's CPU time per call
	// over XGBoost's in the same round.
	ratio float64
	// groveCPU and xgbCPU are the CPU times per call of every round,
	// sorted.
	groveCPU, xgbCPU []time.Duration
}

func run(w io.Writer, cfg config, models []string) error {
	if err := refBuilt(); err != nil {
		return err
	}
	fmt.Fprintf(w, "XGBoost: Grove's runtime (pure Go, intra_op_threads %d) vs XGBoost %s's C API (XGBoosterPredictFromDense, nthread 1)\n",
		cfg.threads, refVersion())
	fmt.Fprintf(w, "%s %s/%s, GOMAXPROCS %d; %d rounds of %v each, median per call; rows cycled: %d, 10%% NaN\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), cfg.rounds, cfg.round, cfg.rows)
	var results []result
	for _, path := range models {
		r, err := benchModel(cfg, path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		results = append(results, r...)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tbatch\tgrove CPU µs/call\txgboost CPU µs/call\tgrove/xgboost\ttarget\tgrove wall µs\txgboost wall µs\t")
	for _, r := range results {
		verdict := ""
		if t, ok := targets[r.batch]; ok {
			verdict = fmt.Sprintf("< %.1f: ", t)
			if r.ratio < t {
				verdict += "met"
			} else {
				verdict += "MISSED"
			}
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.2f\t%s\t%s\t%s\t\n", r.model, r.batch, micros(r.grove.cpu), micros(r.xgb.cpu),
			r.ratio, verdict, micros(r.grove.wall), micros(r.xgb.wall))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "CPU µs/call over the rounds (min, median, max):")
	for _, r := range results {
		fmt.Fprintf(w, "  %s b%d: grove %s, xgboost %s\n", r.model, r.batch, spread(r.groveCPU), spread(r.xgbCPU))
	}
	return nil
}

// spread is the smallest, median and largest of sorted durations.
func spread(d []time.Duration) string {
	return micros(d[0]) + " " + micros(d[len(d)/2]) + " " + micros(d[len(d)-1])
}

func micros(d time.Duration) string {
	us := float64(d) / float64(time.Microsecond)
	if us < 100 {
		return strconv.FormatFloat(us, 'f', 2, 64)
	}
	return strconv.FormatFloat(us, 'f', 0, 64)
}

// benchInput is rows rows of nf features, normal values with one in ten
// missing, the same on every run (as servables/xgboost's benchmarks make
// them).
func benchInput(rows, nf int) []float32 {
	rng := rand.New(rand.NewPCG(30, 1))
	x := make([]float32, rows*nf)
	for i := range x {
		if rng.IntN(10) == 0 {
			x[i] = float32(math.NaN())
		} else {
			x[i] = float32(rng.NormFloat64())
		}
	}
	return x
}

func benchModel(cfg config, path string) ([]result, error) {
	dir, file := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	ctx := context.Background()
	s, err := xgboost.Runtime{}.Load(ctx, dir, []string{file}, servables.LoadOptions{IntraOpThreads: cfg.threads})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	model := s.(*xgboost.Model)
	nf := model.Forest().NumFeature
	ref, err := loadRef(path)
	if err != nil {
		return nil, err
	}
	defer ref.close()
	if ref.numFeature != nf {
		return nil, fmt.Errorf("XGBoost reads %d features, Grove %d", ref.numFeature, nf)
	}
	name := strings.TrimSuffix(file, filepath.Ext(file))
	x := benchInput(cfg.rows, nf)
	var out []result
	for _, batch := range cfg.batches {
		if batch > cfg.rows {
			return nil, fmt.Errorf("batch %d is larger than -rows %d", batch, cfg.rows)
		}
		r, err := benchBatch(ctx, cfg, model, ref, x, batch)
		if err != nil {
			return nil, fmt.Errorf("batch %d: %w", batch, err)
		}
		r.model = name
		out = append(out, r)
	}
	return out, nil
}

func benchBatch(ctx context.Context, cfg config, model *xgboost.Model, ref *refBooster, x []float32, batch int) (result, error) {
	nf := ref.numFeature
	var groveIn [][]servables.Tensor
	var refIn []*refInput
	defer func() {
		for _, in := range refIn {
			in.free()
		}
	}()
	for r := 0; r+batch <= cfg.rows; r += batch {
		in, err := servables.NewTensor(xgboost.InputName, servables.Float32, []int64{int64(batch), int64(nf)})
		if err != nil {
			return result{}, err
		}
		rows := x[r*nf : (r+batch)*nf]
		copy(in.Float32s(), rows)
		groveIn = append(groveIn, []servables.Tensor{in})
		refIn = append(refIn, ref.newInput(rows, batch))
	}
	for k := range groveIn {
		if err := agree(ctx, model, ref, groveIn[k], refIn[k]); err != nil {
			return result{}, fmt.Errorf("rows %d to %d: %w", k*batch, (k+1)*batch-1, err)
		}
	}
	n := len(groveIn)
	var kg, kx int
	grove := func() error {
		_, err := model.Predict(ctx, groveIn[kg])
		kg = (kg + 1) % n
		return err
	}
	xgb := func() error {
		_, err := ref.run(refIn[kx], false)
		kx = (kx + 1) % n
		return err
	}
	// A warm-up round for both, not counted.
	if _, err := timeCalls(cfg.round/4, grove); err != nil {
		return result{}, err
	}
	if _, err := timeCalls(cfg.round/4, xgb); err != nil {
		return result{}, err
	}
	var gt, xt []timing
	var ratios []float64
	for i := range cfg.rounds {
		first, second := grove, xgb
		if i%2 == 1 {
			first, second = xgb, grove
		}
		a, err := timeCalls(cfg.round, first)
		if err != nil {
			return result{}, err
		}
		b, err := timeCalls(cfg.round, second)
		if err != nil {
			return result{}, err
		}
		if i%2 == 1 {
			a, b = b, a
		}
		gt, xt = append(gt, a), append(xt, b)
		ratios = append(ratios, float64(a.cpu)/float64(b.cpu))
	}
	res := result{batch: batch, ratio: median(ratios)}
	res.grove, res.groveCPU = medians(gt)
	res.xgb, res.xgbCPU = medians(xt)
	return res, nil
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}

// medians returns the median wall and CPU times of ts, and the CPU times
// sorted.
func medians(ts []timing) (timing, []time.Duration) {
	var wall, cpu []time.Duration
	for _, t := range ts {
		wall, cpu = append(wall, t.wall), append(cpu, t.cpu)
	}
	slices.Sort(wall)
	slices.Sort(cpu)
	return timing{wall: wall[len(wall)/2], cpu: cpu[len(cpu)/2]}, cpu
}

// timing is the cost of one call, measured over a run of calls.
type timing struct {
	wall time.Duration // elapsed time per call
	cpu  time.Duration // CPU time of the whole process per call
}

// timeCalls calls call for at least d of elapsed time and returns the
// time per call.
func timeCalls(d time.Duration, call func() error) (timing, error) {
	calls := 0
	cpu0 := processCPU()
	start := time.Now()
	for {
		for range 16 {
			if err := call(); err != nil {
				return timing{}, err
			}
		}
		calls += 16
		if el := time.Since(start); el >= d {
			cpu := processCPU() - cpu0
			return timing{wall: el / time.Duration(calls), cpu: cpu / time.Duration(calls)}, nil
		}
	}
}

// processCPU is the CPU time the process has used, its user and system
// time over all its threads (Go's garbage collector and any thread
// XGBoost starts included).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// agree checks that Grove and XGBoost give the same predictions and
// margins on one batch.
func agree(ctx context.Context, model *xgboost.Model, ref *refBooster, in []servables.Tensor, rin *refInput) error {
	out, err := model.Predict(ctx, in)
	if err != nil {
		return err
	}
	for i, name := range []string{xgboost.PredictionName, xgboost.MarginName} {
		want, err := ref.run(rin, i == 1)
		if err != nil {
			return err
		}
		if err := compare(name, out[i].Float32s(), want); err != nil {
			return err
		}
	}
	return nil
}

// errDisagree marks outputs of the two predictors that differ.
var errDisagree = errors.New("Grove and XGBoost disagree")

// compare checks got against want value by value, within
// 1e-6 · max(1, |want|).
func compare(name string, got, want []float32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%w: %s has %d values from Grove, %d from XGBoost", errDisagree, name, len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if math.IsNaN(float64(g)) || math.IsNaN(float64(w)) ||
			math.Abs(float64(g)-float64(w)) > 1e-6*math.Max(1, math.Abs(float64(w))) {
			return fmt.Errorf("%w: %s[%d] is %v from Grove, %v from XGBoost", errDisagree, name, i, g, w)
		}
	}
	return nil
}
