package placement

import (
	"slices"
	"time"
)

// An on-demand model's copies follow its requests (docs/density.md,
// "In a cluster"). The nodes publish, for each on-demand model, the
// requests waiting for it to be placed anywhere, the requests their copy
// holds and when it last took one (Member.Use). WantCopies turns those
// figures into each model's Demand: the controller calls it before each
// Compute, with the Marks it returned last time.

// Mark is what the controller remembers of one on-demand model's demand
// between two WantCopies.
type Mark struct {
	// Want is the copies the demand asked for last time.
	Want int
	// Used is the last time the model was asked for: a request on any
	// node, or its copies raised.
	Used time.Time
	// Busy is the last time every ready copy was saturated (or a copy was
	// added because of it), or the start of the window whose Peak judged
	// the extra copies last.
	Busy time.Time
	// Peak is the most requests the copies held at once (summed over the
	// nodes) since Busy: the load the copies kept after a quiet window
	// must carry.
	Peak int64
}

// Marks are the marks of the on-demand models by path; the controller
// owns them, WantCopies returns the next ones and never changes its input.
type Marks map[string]Mark

// DemandInput is what WantCopies decides from.
type DemandInput struct {
	// Models are the desired models; only the on-demand ones are read.
	Models []Model
	// Members are the live nodes, with their Use figures.
	Members []Member
	// Current is the table in force.
	Current Table
	// Marks are the marks WantCopies returned last time (nil: none, as
	// for a controller that just took over: each model placed keeps its
	// copies until it goes idle).
	Marks Marks
	// Now is the time of the decision.
	Now time.Time
	// IdleAfter is idle_unload_after: a model no node took a request for
	// that long drops to its MinNodes copies, and one whose copies were
	// not all saturated for that long drops its extra copies to one. 0:
	// never.
	IdleAfter time.Duration
}

// Saturated reports whether a copy with these figures has more requests
// than its model actors run at once: at least twice its replicas in
// flight, so that requests queue behind each one.
func (u Use) Saturated() bool {
	return u.InFlight >= 2*int64(max(u.Replicas, 1))
}

// WantCopies returns each on-demand model's Demand (the copies its
// requests ask for now; models without demand are absent), the marks to
// give the next call, and when the demand next changes by itself (a model
// going idle; zero for never).
//
//   - A model some node has requests waiting for (ready nowhere) wants
//     at least one copy.
//   - A model whose copies are all listed, ready and saturated (Saturated)
//     wants one more, up to its Nodes; one copy at a time: none is added
//     while one is loading.
//   - A model whose copies were not all saturated for IdleAfter keeps the
//     copies the most requests they held at once in that window needed
//     (the fewest that Peak would not saturate, at least one), and the
//     window starts again: one copy fewer than saturation asked for only
//     when the load fell, so that a steady load keeps its copies.
//   - A model that took no request on any node for IdleAfter wants none
//     (Compute keeps its MinNodes). A request in flight on a copy, and a
//     copy loading where the table lists it, count as taking one now.
//   - Otherwise a model wants what it wanted last time, or, with no mark
//     (a controller that just took over), the copies the table lists for
//     it, last used when a node last saw it take a request.
func WantCopies(in DemandInput) (map[string]int, Marks, time.Time) {
	demand := map[string]int{}
	marks := Marks{}
	var next time.Time
	soonest := func(t time.Time) {
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	for _, m := range in.Models {
		if !m.OnDemand {
			continue
		}
		listed := in.Current[m.Path]
		mark, known := in.Marks[m.Path]
		if !known {
			// Used from the nodes' records below, else now: a new leader
			// (or one whose table write failed) does not restart the
			// idle clock of a model the nodes saw idle.
			mark = Mark{Want: len(listed), Busy: in.Now}
		}
		waiting, saturated, ready := 0, len(listed) > 0, 0
		var inFlight int64
		replicas := 1
		for _, n := range in.Members {
			u := n.Use[m.Path]
			waiting += u.Waiting
			if u.LastUsed > 0 {
				if t := time.Unix(u.LastUsed, 0); t.After(mark.Used) {
					mark.Used = t
				}
			}
			if u.InFlight > 0 {
				mark.Used = in.Now // a request still held is a use now, however long it takes
				inFlight += u.InFlight
			}
			if !slices.Contains(listed, n.Name) {
				continue
			}
			replicas = max(replicas, u.Replicas)
			switch {
			case holdsReady(n, m.Path):
				ready++
				saturated = saturated && u.Saturated()
			case holds(n, m.Path, Loading):
				mark.Used = in.Now // placed for a demand that waits for this load
				saturated = false
			default:
				saturated = false
			}
		}
		if mark.Used.IsZero() {
			mark.Used = in.Now
		}
		mark.Peak = max(mark.Peak, inFlight)
		nodes := max(m.Nodes, 1)
		switch {
		case waiting > 0:
			mark.Used = in.Now
			if mark.Want < 1 {
				mark.Want, mark.Busy = 1, in.Now
			}
		case in.IdleAfter > 0 && !in.Now.Before(mark.Used.Add(in.IdleAfter)):
			mark.Want = 0
		}
		if mark.Want > 0 && saturated && ready == len(listed) {
			mark.Busy, mark.Peak = in.Now, inFlight
			if want := max(mark.Want, m.MinNodes); want < nodes && len(listed) >= want {
				mark.Want = want + 1
			}
		}
		if mark.Want > 1 && in.IdleAfter > 0 && !in.Now.Before(mark.Busy.Add(in.IdleAfter)) {
			mark.Want = min(mark.Want, copiesFor(mark.Peak, replicas))
			mark.Busy, mark.Peak = in.Now, inFlight
		}
		mark.Want = min(mark.Want, nodes)
		if mark.Want == 0 {
			continue // no demand: forgotten, as a model never asked for
		}
		demand[m.Path] = mark.Want
		marks[m.Path] = mark
		if in.IdleAfter > 0 {
			soonest(mark.Used.Add(in.IdleAfter))
			if mark.Want > 1 {
				soonest(mark.Busy.Add(in.IdleAfter))
			}
		}
	}
	return demand, marks, next
}

// copiesFor is the fewest copies of replicas model actors each that
// inFlight requests, spread evenly, leave unsaturated (Use.Saturated: at
// least twice the replicas in flight), at least one.
func copiesFor(inFlight int64, replicas int) int {
	return int(inFlight/(2*int64(max(replicas, 1)))) + 1
}

// holdsReady reports whether n holds a ready content of path.
func holdsReady(n Member, path string) bool {
	return holds(n, path, Ready)
}

// holds reports whether n holds a content of path in state st.
func holds(n Member, path string, st State) bool {
	for _, h := range n.Held {
		if h.Path == path && h.State == st {
			return true
		}
	}
	return false
}
