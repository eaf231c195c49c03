package actors

import (
	"context"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/sys/unix"

	"github.com/groveml/grove/internal/lowprio"
	"github.com/groveml/grove/servables"
)

// threadNice is the calling thread's nice value.
func threadNice(t *testing.T) int {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n, err := lowprio.ThreadNice(unix.Gettid())
	if err != nil {
		t.Error(err)
	}
	return n
}

// niceRecorder records the nice value of the thread that runs each Load
// and each forward call (by its first input value); starts is what it
// answers as a servables.ThreadStarter.
type niceRecorder struct {
	*countingRuntime
	t      *testing.T
	starts bool
	mu     sync.Mutex
	loads  []int
	calls  map[float64][]int
}

func (r *niceRecorder) StartsThreads(servables.LoadOptions) bool { return r.starts }

func (r *niceRecorder) Load(ctx context.Context, dir string, files []string, o servables.LoadOptions) (servables.Servable, error) {
	n := threadNice(r.t)
	r.mu.Lock()
	r.loads = append(r.loads, n)
	r.mu.Unlock()
	sv, err := r.countingRuntime.Load(ctx, dir, files, o)
	if err != nil {
		return nil, err
	}
	return &niceServable{Servable: sv, r: r}, nil
}

type niceServable struct {
	servables.Servable
	r *niceRecorder
}

func (s *niceServable) Predict(ctx context.Context, in []servables.Tensor) ([]servables.Tensor, error) {
	n := threadNice(s.r.t)
	s.r.mu.Lock()
	s.r.calls[in[0].Float64At(0)] = append(s.r.calls[in[0].Float64At(0)], n)
	s.r.mu.Unlock()
	return s.Servable.Predict(ctx, in)
}

// fetchRecorder is a bucket that records the nice value of the thread
// that opens each object under prefix (a fetch's download).
type fetchRecorder struct {
	*memBucket
	t      *testing.T
	prefix string
	mu     sync.Mutex
	nices  []int
}

func (b *fetchRecorder) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	if strings.HasPrefix(name, b.prefix) {
		n := threadNice(b.t)
		b.mu.Lock()
		b.nices = append(b.nices, n)
		b.mu.Unlock()
	}
	return b.memBucket.Open(ctx, name)
}

func TestLoadsAndWarmUpsRunAtTheLowerPriorityAndFetchesAndRequestsDoNot(t *testing.T) {
	base := threadNice(t)
	if base >= lowprio.Nice {
		t.Skipf("the test runs at nice %d already", base)
	}
	for _, starts := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			var rec *niceRecorder
			var fetched *fetchRecorder
			w := newWorld(t, configJSON(entry("a/", "", `"load": "on_demand", "warm_up_batch_request_json": "[[7]]"`)),
				map[string]faultySpec{"a/": {}}, func(w *world, o *Options) {
					rec = &niceRecorder{countingRuntime: w.rt, t: t, starts: starts, calls: map[float64][]int{}}
					o.Runtimes = servables.Registry{rec}
					fetched = &fetchRecorder{memBucket: w.b, t: t, prefix: "a/"}
					o.Bucket = fetched
				})
			defer w.stop()
			synctest.Wait()
			for range 3 {
				if r := w.infer("a/", 1); r.Err != nil {
					t.Fatal(r.Err)
				}
			}
			fetched.mu.Lock()
			if len(fetched.nices) == 0 {
				t.Errorf("StartsThreads %v: the fetch opened no file of the model", starts)
			}
			// The fetch is Go code: on a lowered thread it would hold a
			// P while the kernel runs the serving threads first.
			for _, n := range fetched.nices {
				if n != base {
					t.Errorf("StartsThreads %v: the fetch ran at nice %v, want %d", starts, fetched.nices, base)
					break
				}
			}
			fetched.mu.Unlock()
			rec.mu.Lock()
			defer rec.mu.Unlock()
			wantLoad := lowprio.Nice
			if starts {
				wantLoad = base // its threads would inherit the priority
			}
			if len(rec.loads) != 1 || rec.loads[0] != wantLoad {
				t.Errorf("StartsThreads %v: loads ran at nice %v, want one at %d", starts, rec.loads, wantLoad)
			}
			if warm := rec.calls[7]; len(warm) != 1 || warm[0] != lowprio.Nice {
				t.Errorf("StartsThreads %v: the warm-up's forward call ran at nice %v, want one at %d", starts, warm, lowprio.Nice)
			}
			if user := rec.calls[1]; len(user) != 3 || user[0] != base || user[1] != base || user[2] != base {
				t.Errorf("StartsThreads %v: the requests' forward calls ran at nice %v, want three at %d", starts, user, base)
			}
		})
	}
}

// burnThreadCPU spins until the calling thread has used d more CPU time.
func burnThreadCPU(d time.Duration) {
	for start := lowprio.ThreadCPU(); lowprio.ThreadCPU()-start < d; {
	}
}

// cpuBurner is a runtime whose loads, and forward calls whose first input
// value is 7 (the warm-up's), spend a given CPU time on their thread.
type cpuBurner struct {
	*countingRuntime
	load, warmUp time.Duration
}

func (r *cpuBurner) Load(ctx context.Context, dir string, files []string, o servables.LoadOptions) (servables.Servable, error) {
	burnThreadCPU(r.load)
	sv, err := r.countingRuntime.Load(ctx, dir, files, o)
	if err != nil {
		return nil, err
	}
	return &burningServable{Servable: sv, r: r}, nil
}

type burningServable struct {
	servables.Servable
	r *cpuBurner
}

func (s *burningServable) Predict(ctx context.Context, in []servables.Tensor) ([]servables.Tensor, error) {
	if in[0].Float64At(0) == 7 {
		burnThreadCPU(s.r.warmUp)
	}
	return s.Servable.Predict(ctx, in)
}

func TestTheCPUOfLoadsAndWarmUpsIsCountedAsLowPriorityLoadWork(t *testing.T) {
	const load, warmUp = 30 * time.Millisecond, 20 * time.Millisecond
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", `"load": "on_demand", "warm_up_batch_request_json": "[[7]]"`)),
			map[string]faultySpec{"a/": {}}, func(w *world, o *Options) {
				o.Runtimes = servables.Registry{&cpuBurner{countingRuntime: w.rt, load: load, warmUp: warmUp}}
			})
		defer w.stop()
		synctest.Wait()
		cpu := func(work string) float64 {
			return w.metric("grove_low_priority_cpu_seconds_total", map[string]string{"work": work})
		}
		if got := cpu("load"); got != 0 {
			t.Errorf("before any load: %v s of load work, want 0", got)
		}
		if r := w.infer("a/", 1); r.Err != nil {
			t.Fatal(r.Err)
		}
		// The load and the warm-up ran on lowered threads; the request's
		// forward call did not, and no shadow work ran.
		if got, want := cpu("load"), (load + warmUp).Seconds(); got < want || got > want+0.5 {
			t.Errorf("load work: %v s of CPU, want %v s (the load's and the warm-up's) and a little more", got, want)
		}
		if got := cpu("shadow"); got != 0 {
			t.Errorf("shadow work: %v s of CPU, want 0", got)
		}
	})
}

func TestTheShadowWorkersCountEachJobsCPU(t *testing.T) {
	var mu sync.Mutex
	var spent []time.Duration
	lp := newLowPriority(1, 2, slog.New(slog.DiscardHandler), func(d time.Duration) {
		mu.Lock()
		spent = append(spent, d)
		mu.Unlock()
	})
	for _, d := range []time.Duration{5 * time.Millisecond, 15 * time.Millisecond} {
		if !lp.trySubmit(func() { burnThreadCPU(d) }) {
			t.Fatal("the queue refused a job")
		}
	}
	lp.stop()
	if len(spent) != 2 || spent[0] < 5*time.Millisecond || spent[1] < 15*time.Millisecond || spent[1] > time.Second {
		t.Errorf("the workers counted %v, want about 5ms and 15ms", spent)
	}
}
