package main

// The cost of grove serve --evaluate: "grove+eval" is grove+log (a grove
// with --kafka-embedded and --prediction-log-level FULL) plus --evaluate,
// on a bucket whose model entry for pctr_v1/ (the model the scenarios
// call directly) has an outcomes rule, so that its in-process evaluator
// takes every prediction it logs, keeps it in its store for the window
// and scores it when the window closes (no outcome comes: missing
// negative). Its b1c32 req/s is compared with grove+log's, in rounds
// that interleave the two (runEvalAB) so that the machine's drift falls
// on both alike; the target is at most 5 % fewer.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// serverGroveEval is grove+log with the evaluator in-process.
const serverGroveEval = "grove+eval"

// evalCostTarget is the target: grove+eval's req/s over
// grove+log's at b1c32.
const evalCostTarget = 0.95

// evalABWindow is each server's measured window in a round of the A/B
// (after a warm-up of a quarter of it).
const evalABWindow = 2 * time.Second

// evalServeRule is pctr_v1/'s outcomes rule on grove+eval: short windows,
// so that they close and are scored within the run.
const evalServeRule = `{"label": "click", "kind": "binary", "window": "1s", "lateness": "1s"}`

// writeEvalBucket writes grove+eval's bucket: bucket's files with a model
// config whose pctr_v1/ entry has evalServeRule.
func writeEvalBucket(bucket, dir string) error {
	for _, f := range []string{modelPath + "model.pt", onnxPath + "model.onnx", deepPath + "model.pt"} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			return err
		}
		if err := os.Link(filepath.Join(bucket, f), filepath.Join(dir, f)); err != nil {
			return err
		}
	}
	config := `{"model_metadata":[{"model_path":"` + modelPath + `","outcomes":` + evalServeRule + `},{"model_path":"` + onnxPath +
		`"},{"model_path":"` + deepPath + `"}]}` + "\n"
	return os.WriteFile(filepath.Join(dir, "model_config.json"), []byte(config), 0o644)
}

// evalArgs are grove+eval's grove serve arguments beyond grove+log's.
func evalArgs() []string { return []string{"--evaluate"} }

// evalAB is grove+eval against grove+log at batch 1, c 32, interleaved.
type evalAB struct {
	Rounds int           `json:"rounds"`
	Window time.Duration `json:"window_ns"`
	// LogRate and EvalRate are the pooled req/s of grove+log and
	// grove+eval (requests completed inside the measured windows); Ratio
	// is EvalRate over LogRate.
	LogRate  float64 `json:"log_req_per_sec"`
	EvalRate float64 `json:"eval_req_per_sec"`
	Ratio    float64 `json:"ratio"`
	Target   float64 `json:"target"`
	// LogCPU and EvalCPU are the cores each server's process kept busy
	// on average over its windows.
	LogCPU  float64 `json:"log_cores"`
	EvalCPU float64 `json:"eval_cores"`
	Errors  [2]int  `json:"errors"`
	// Taken is what grove+eval's evaluator counted as taken at the end,
	// CatchUp the longest it took after a window to take every
	// prediction grove+eval had logged (the evaluator's work does not
	// spill into grove+log's next window).
	Taken   uint64        `json:"evaluator_taken"`
	CatchUp time.Duration `json:"evaluator_catch_up_ns"`
	Error   string        `json:"error,omitempty"`
}

// runEvalAB measures evalAB: rounds of evalABWindow on grove+log and
// grove+eval in turn, the order alternating each round; after each
// grove+eval window it waits until its evaluator has taken every
// prediction it logged (read from its evaluations topic on kafkaAddr).
func runEvalAB(ctx context.Context, logEP, evalEP *endpoint, kafkaAddr string, row []float64, rounds int, o options) *evalAB {
	ab := &evalAB{Rounds: rounds, Window: evalABWindow, Target: evalCostTarget}
	cl, err := kgo.NewClient(kgo.SeedBrokers(kafkaAddr), kgo.ConsumeTopics(evalResultTopic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		ab.Error = err.Error()
		return ab
	}
	defer cl.Close()
	totals := evalTotals{}
	eps := [2]*endpoint{logEP, evalEP}
	var pools [2]abPool
	err = interleave(ctx, rounds, 2, func(i int) error {
		res, c := measureWindow(ctx, scenarioSpec(eps[i], row, 1, 32, evalABWindow/4, evalABWindow, o), eps[i].pid)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		pools[i].add(res, c, evalABWindow)
		if i == 0 {
			return nil
		}
		st, err := fetchPredLog(ctx, evalEP.baseURL)
		if err != nil {
			return err
		}
		waited, err := waitTaken(ctx, cl, totals, st.Delivered)
		ab.CatchUp = max(ab.CatchUp, waited)
		return err
	})
	if err != nil {
		if ctx.Err() == nil {
			ab.Error = err.Error()
		}
		return ab
	}
	ab.Taken = totals.sum().taken()
	ab.LogRate, ab.EvalRate = pools[0].rate(), pools[1].rate()
	ab.LogCPU, ab.EvalCPU = pools[0].cores(), pools[1].cores()
	ab.Errors = [2]int{pools[0].Errors, pools[1].Errors}
	if ab.LogRate > 0 {
		ab.Ratio = ab.EvalRate / ab.LogRate
	}
	return ab
}

// waitTaken reads the evaluations topic into totals until its counters
// say at least want predictions were taken; it returns how long that took.
func waitTaken(ctx context.Context, cl *kgo.Client, totals evalTotals, want uint64) (time.Duration, error) {
	start := time.Now()
	for totals.sum().taken() < want {
		if time.Since(start) > drainTimeout {
			return time.Since(start), fmt.Errorf("grove+eval's evaluator took %d of %d predictions within %v", totals.sum().taken(), want, drainTimeout)
		}
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return time.Since(start), ctx.Err()
		}
		for _, r := range fs.Records() {
			if _, err := totals.take(r); err != nil {
				return time.Since(start), err
			}
		}
	}
	return time.Since(start), nil
}

// lines are the A/B's lines of the report.
func (ab *evalAB) lines() []string {
	if ab.Error != "" {
		return []string{"Evaluator cost (grove serve --evaluate vs grove+log at batch 1, conc 32, interleaved): FAILED: " + ab.Error}
	}
	return []string{fmt.Sprintf("Evaluator cost at batch 1, conc 32, interleaved (%d rounds of %v on each): grove+eval %s req/s vs grove+log %s req/s: %.3fx "+
		"(target: at least %.2fx: %s); server CPU %.2f vs %.2f cores; the evaluator took %d predictions, at most %s behind the end of a window; %d/%d errors",
		ab.Rounds, ab.Window, fmtRate(ab.EvalRate), fmtRate(ab.LogRate), ab.Ratio, ab.Target, verdict(ab.Ratio >= ab.Target),
		ab.EvalCPU, ab.LogCPU, ab.Taken, fmtDur(ab.CatchUp), ab.Errors[1], ab.Errors[0])}
}
