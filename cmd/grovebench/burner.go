package main

// The CPU burner: grovebench's own child process that spins a given share
// of the CPUs at the nice value of Grove's loads (lowprio.Nice), in short
// periods, and does nothing else. The ondemand scenario runs it beside the
// warm load, in place of the demand loads, as the control of its verdicts:
// what any low-priority work of the churn's CPU costs the warm requests on
// this machine, with none of Grove's code in it.

import (
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/groveml/grove/internal/lowprio"
)

// burnerEnv holds the cores the burner child spins ("0.62").
const burnerEnv = "GROVEBENCH_BURNER"

// burnPeriod is the burner's cycle: it spins its share of each period and
// sleeps the rest, as a node's loads come and go.
const burnPeriod = 10 * time.Millisecond

// parseBurnerCores reads burnerEnv's value: a number of cores above 0 and
// at most the CPUs of this machine.
func parseBurnerCores(spec string) (float64, error) {
	cores, err := strconv.ParseFloat(spec, 64)
	if err != nil || !(cores > 0) || cores > float64(runtime.NumCPU()) {
		return 0, fmt.Errorf("%s=%q: want a number of cores above 0 and at most %d", burnerEnv, spec, runtime.NumCPU())
	}
	return cores, nil
}

// serveBurner spins cores of the CPUs (burnerEnv's value) on as many
// threads as whole cores it needs, each at lowprio.Nice, until the
// process is killed. It returns only on a bad spec or a thread whose
// priority cannot be set.
func serveBurner(spec string) error {
	cores, err := parseBurnerCores(spec)
	if err != nil {
		return err
	}
	threads := int(math.Ceil(cores))
	share := cores / float64(threads)
	runtime.GOMAXPROCS(threads + 1)
	errs := make(chan error, threads)
	for range threads {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread keeps its nice value
			if err := lowprio.Lower(lowprio.Nice); err != nil {
				errs <- fmt.Errorf("the burner thread: %w", err)
				return
			}
			busy := time.Duration(share * float64(burnPeriod))
			for next := time.Now(); ; {
				end := next.Add(busy)
				for time.Now().Before(end) {
				}
				next = next.Add(burnPeriod)
				time.Sleep(time.Until(next))
			}
		}()
	}
	return <-errs
}

// minBurnerCores is the smallest share the burner spins: less is no
// measurable control.
const minBurnerCores = 0.01

// startBurner starts the burner child spinning cores of the CPUs; its
// output goes to logPath.
func startBurner(ctx context.Context, cores float64, logPath string) (*child, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), burnerEnv+"="+strconv.FormatFloat(cores, 'g', -1, 64))
	return startChild("CPU burner", cmd, filepath.Clean(logPath))
}
