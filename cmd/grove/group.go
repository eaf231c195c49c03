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
// every interrupt and execute of this one has returned. Every interrupt
// gets the same context, which expires stopTimeout after the first execute
// returned.
type group struct {
	stopTimeout time.Duration
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
	g.stop(func(i, j int) { close(runs[i][j].interrupted); <-runs[i][j].done })
	return err
}

// abort stops the components added so far, in the same order as run does,
// without having executed them, and returns err: for a failure while the
// server is being set up.
func (g *group) abort(err error) error {
	g.stop(func(int, int) {})
	return err
}

// stop interrupts the stages in reverse order; after interrupting
// component j of stage i it calls wait(i, j), and the next stage starts
// once every call of this stage has returned.
func (g *group) stop(wait func(i, j int)) {
	ctx, cancel := context.WithTimeout(context.Background(), g.stopTimeout)
	defer cancel()
	for i := len(g.stages) - 1; i >= 0; i-- {
		var wg sync.WaitGroup
		for j, c := range g.stages[i] {
			wg.Go(func() {
				start := time.Now()
				if c.interrupt != nil {
					c.interrupt(ctx)
				}
				wait(i, j)
				if g.log != nil {
					g.log.Debug("stopped", "component", c.name, "took", time.Since(start))
				}
			})
		}
		wg.Wait()
	}
}
