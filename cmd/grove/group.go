package main

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// component is one part of the server that runs until it is stopped.
type component struct {
	// name identifies the component in the group's log.
	name string
	// execute runs the component and returns when it stops, on its own or
	// because interrupt was called; nil means it does nothing but wait for
	// interrupt (its work runs elsewhere, as the actors' does).
	execute func() error
	// interrupt makes execute return, and returns once the component has
	// stopped or ctx is done (the stop deadline); nil means nothing to do.
	interrupt func(ctx context.Context)
}

// group runs the server's components and stops them in a fixed order, after
// oklog/run's idea: each component is an execute/interrupt pair. Components
// are added in the order they start, in stages (one add call each). run
// executes all of them at once; as soon as one execute returns, the stages
// stop in the reverse order of their addition: the components of a stage
// are interrupted together, and the next stage is interrupted only once
// every interrupt and execute of this one has returned, or its time is
// up. The whole stop takes at most stopTimeout after the first execute
// returned, and it is shared out: a stage named in shares has that
// fraction of stopTimeout reserved for it, which the stages stopped
// before it cannot use. Each stage may run until the end of stopTimeout
// less the shares of the stages still to stop after it: at least its own
// share, and whatever the stages before it left. A component still
// running when its stage's time is up is left behind (logged) and the
// next stage starts.
type group struct {
	stopTimeout time.Duration
	// shares maps a stage's name to its share of stopTimeout, a fraction;
	// they must sum to less than 1.
	shares map[string]float64
	// log, if not nil, records when each component has stopped (debug).
	log    *slog.Logger
	names  []string      // of the stages
	stages [][]component // in the order they were added
}

// add adds c to the stage named stage: to the last stage if it has that
// name, else to a new stage after it.
func (g *group) add(stage string, c component) {
	if n := len(g.names); n > 0 && g.names[n-1] == stage {
		g.stages[n-1] = append(g.stages[n-1], c)
		return
	}
	g.names = append(g.names, stage)
	g.stages = append(g.stages, []component{c})
}

// run executes every component and, once the first returns, stops them all
// (see group). It returns the error of the execute that returned first.
func (g *group) run() error {
	type running struct {
		interrupted chan struct{} // closed once interrupt has returned
		done        chan struct{} // closed once execute has returned
	}
	first := make(chan error, 1)
	runs := make([][]running, len(g.stages))
	for i, stage := range g.stages {
		for _, c := range stage {
			r := running{interrupted: make(chan struct{}), done: make(chan struct{})}
			runs[i] = append(runs[i], r)
			go func() {
				defer close(r.done)
				var err error
				if c.execute != nil {
					err = c.execute()
				} else {
					<-r.interrupted
				}
				select {
				case first <- err:
				default:
				}
			}()
		}
	}
	err := <-first
	g.stop(func(ctx context.Context, i, j int) bool {
		close(runs[i][j].interrupted)
		select {
		case <-runs[i][j].done:
			return true
		case <-ctx.Done():
			return false
		}
	})
	return err
}

// abort stops the components added so far, in the same order as run does,
// without having executed them, and returns err: for a failure while the
// server is being set up.
func (g *group) abort(err error) error {
	g.stop(func(context.Context, int, int) bool { return true })
	return err
}

// stop interrupts the stages in reverse order, each with a context
// that expires at the end of its time (see group); after interrupting
// component j of stage i it calls wait(ctx, i, j), which reports whether
// the component stopped before ctx expired. The next stage starts once
// every call of this stage has returned.
func (g *group) stop(wait func(ctx context.Context, i, j int) bool) {
	end := time.Now().Add(g.stopTimeout)
	for i := len(g.stages) - 1; i >= 0; i-- {
		ctx, cancel := context.WithDeadline(context.Background(), g.stageDeadline(i, end))
		var wg sync.WaitGroup
		for j, c := range g.stages[i] {
			wg.Go(func() {
				start := time.Now()
				if c.interrupt != nil {
					c.interrupt(ctx)
				}
				stopped := wait(ctx, i, j)
				if g.log == nil {
					return
				}
				if !stopped {
					g.log.Warn("did not stop within its share of drain_timeout; left behind", "component", c.name, "took", time.Since(start))
					return
				}
				g.log.Debug("stopped", "component", c.name, "took", time.Since(start))
			})
		}
		wg.Wait()
		cancel()
	}
}

// stageDeadline is when stage i must have stopped: end less the shares
// of the stages stopped after it.
func (g *group) stageDeadline(i int, end time.Time) time.Time {
	for k := range i {
		end = end.Add(-time.Duration(g.shares[g.names[k]] * float64(g.stopTimeout)))
	}
	return end
}
