package xgboost

import (
	"sync"
	"sync/atomic"
)

// parallelMinSteps is the least work, in node steps (rows times the sum
// of the trees' depths), that a request must have for its rows to be
// split over intra_op_threads: handing rows to a helper goroutine costs a
// few microseconds (waking it on another core), as much as 2 to 4 rows of
// the 100-tree depth-6 model (600 steps a row, about 1.2 µs). With
// BenchmarkPredictIntraOpThreads on 2 shared cores, two threads took half
// the time from 16 rows of that model and made no measurable difference
// at 2 to 8; this threshold splits from 14 rows of it, from 2 rows of a
// 1,000-tree depth-8 model.
const parallelMinSteps = 8000

// workers is a Model's fixed pool of helper goroutines for
// intra_op_threads: a request with enough rows is cut into chunks of
// rows, and its own goroutine and every idle helper take chunks until
// none is left. No goroutine is started per request, and a request that
// finds every helper busy does its chunks itself.
type workers struct {
	f *Forest
	// helpers is how many goroutines help a request: intra_op_threads-1.
	helpers int
	// minRows is the fewest rows worth splitting (parallelMinSteps).
	minRows int
	work    chan *job // unbuffered: a send succeeds only to an idle helper
	quit    chan struct{}
	stop    sync.Once
	jobs    sync.Pool // *job
}

// job is one request's rows, split in chunks taken in turn.
type job struct {
	x32    []float32 // the input, one of x32 and x64
	x64    []float64
	miss   missing
	out    []float32
	rows   int
	chunk  int          // rows per chunk
	next   atomic.Int64 // the next chunk to take
	chunks int64
	done   sync.WaitGroup // the helpers that took the job
}

// newWorkers starts threads-1 helpers for f; nil when threads < 2.
func newWorkers(f *Forest, threads int) *workers {
	if threads < 2 {
		return nil
	}
	steps := int64(0) // per row
	for _, d := range f.depth {
		steps += int64(d)
	}
	minRows := int64(2)
	if steps > 0 {
		minRows = max(minRows, (parallelMinSteps+steps-1)/steps)
	}
	w := &workers{f: f, helpers: threads - 1, minRows: int(min(minRows, 1<<30)),
		work: make(chan *job), quit: make(chan struct{})}
	for range w.helpers {
		go w.help()
	}
	return w
}

// close stops the helpers; a request running then finishes on its own
// goroutine.
func (w *workers) close() {
	w.stop.Do(func() { close(w.quit) })
}

func (w *workers) help() {
	for {
		select {
		case j := <-w.work:
			w.run(j)
			j.done.Done()
		case <-w.quit:
			return
		}
	}
}

// worth reports whether rows rows are worth splitting; never on a nil
// pool (one thread).
func (w *workers) worth(rows int) bool {
	return w != nil && rows >= w.minRows
}

// margins is Forest.eval with the rows split over the calling goroutine
// and the idle helpers. Each row's margins are computed as on one thread,
// so the result is the same.
func (w *workers) margins(x32 []float32, x64 []float64, rows int, out []float32, miss missing) error {
	if err := w.f.checkSizes(len(x32)+len(x64), rows, len(out)); err != nil {
		return err
	}
	j, _ := w.jobs.Get().(*job)
	if j == nil {
		j = &job{}
	}
	threads := w.helpers + 1
	chunk := (rows + threads - 1) / threads
	if chunk > lanes {
		chunk = (chunk + lanes - 1) / lanes * lanes // whole lanes
	}
	chunk = min(chunk, w.f.rowsPerBlock())
	j.x32, j.x64, j.miss, j.out, j.rows, j.chunk = x32, x64, miss, out, rows, chunk
	j.chunks = int64((rows + chunk - 1) / chunk)
	j.next.Store(0)
	for k := 0; k < w.helpers && int64(k+1) < j.chunks; k++ {
		j.done.Add(1)
		if !w.offer(j) {
			j.done.Done()
			break
		}
	}
	w.run(j)
	j.done.Wait()
	j.x32, j.x64, j.out = nil, nil, nil
	w.jobs.Put(j)
	return nil
}

// offer hands j to an idle helper, if there is one.
func (w *workers) offer(j *job) bool {
	select {
	case w.work <- j:
		return true
	default:
		return false
	}
}

// run takes j's chunks until none is left.
func (w *workers) run(j *job) {
	f := w.f
	b := f.getBlock()
	for {
		c := j.next.Add(1) - 1
		if c >= j.chunks {
			break
		}
		lo := int(c) * j.chunk
		hi := min(lo+j.chunk, j.rows)
		if j.x32 != nil || j.x64 == nil {
			margins(f, j.x32, lo, hi, j.out, b, j.miss)
		} else {
			margins(f, j.x64, lo, hi, j.out, b, j.miss)
		}
	}
	f.putBlock(b)
}
