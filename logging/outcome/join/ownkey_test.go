package join

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/grovepb"
)

// keyedStream is a script of requests logged under record keys of every
// kind: mostly their own request_id, sometimes a key shared by other
// requests (a user's), sometimes none; of one or two items and rows,
// served and shadowed in either order of event time and of arrival;
// outcomes by request_id and row, and by key (the request's, a shared
// one, one nothing was logged under), some before their predictions,
// some late, some twice; the clock a little ahead of the event times and
// advanced now and then.
func keyedStream(seed uint64, requests int) []step {
	rng := rand.New(rand.NewPCG(seed, 3))
	window := rule().Window
	type timed struct {
		at time.Duration
		s  step
	}
	var all []timed
	keyOf := func(req string) string {
		switch x := rng.Float64(); {
		case x < 0.7:
			return req
		case x < 0.85:
			return fmt.Sprintf("user-%d", rng.IntN(5))
		}
		return ""
	}
	for i := range requests {
		ts := time.Duration(i) * 20 * time.Second
		req := fmt.Sprintf("r%d", i)
		items := 1 + rng.IntN(2)
		if rng.Float64() < 0.7 {
			items = 1
		}
		for item := range items {
			rows := 1
			if rng.Float64() < 0.2 {
				rows = 2
			}
			for _, rel := range []string{"v1", "v2"} {
				at := ts + time.Duration(rng.IntN(120))*time.Second - time.Minute
				values := make([]float32, rows)
				for r := range values {
					values[r] = float32(0.01 + 0.5*rng.Float64())
				}
				ev := event(fmt.Sprintf("%s/%d/%s", req, item, rel), req, at, rel == "v1", rel, values...)
				ev.Item = int64(item)
				st := step{pred: ev, key: keyOf(req)}
				arrive := at + time.Duration(rng.IntN(90))*time.Second
				all = append(all, timed{arrive, st})
				if rng.Float64() < 0.05 {
					all = append(all, timed{arrive + time.Second, st})
				}
			}
		}
		for range rng.IntN(3) {
			at := ts + time.Duration(rng.Float64()*1.3*float64(window))
			o := &grovepb.Outcome{OutcomeId: fmt.Sprintf("o%d-%d", i, rng.IntN(1<<20)), EventTime: timestamppb.New(t0.Add(at)),
				Labels: map[string]float64{"click": 1}}
			switch x := rng.Float64(); {
			case x < 0.4:
				o.RequestId, o.Item, o.Row = req, int64(rng.IntN(items)), int64(rng.IntN(2))
			case x < 0.8:
				o.Key = req
			case x < 0.95:
				o.Key = fmt.Sprintf("user-%d", rng.IntN(5))
			default:
				o.Key = "nobody"
			}
			// Some before their predictions, some long after.
			arrive := at + time.Duration(rng.IntN(200))*time.Second - 100*time.Second
			all = append(all, timed{arrive, step{out: o}})
			if rng.Float64() < 0.05 {
				all = append(all, timed{arrive + time.Second, step{out: o}})
			}
		}
	}
	slices.SortStableFunc(all, func(a, b timed) int { return compareInt(int64(a.at), int64(b.at)) })
	var out []step
	for i, a := range all {
		a.s.clock = a.at + 30*time.Second
		out = append(out, a.s)
		if i%17 == 0 {
			out = append(out, step{clock: a.s.clock})
		}
	}
	last := all[len(all)-1].at
	return append(out, step{clock: last + time.Hour}, step{clock: last + 3*time.Hour})
}

// A request's own join key standing for its record key's index entry
// (indexKey) is a way of storing the index, not of joining: over streams
// with every kind of record key, the Joiner's counters after every step
// and its results at the end are those of a Joiner that indexes every
// join key.
func TestOwnKeysJoinAsAnIndexOfEveryKey(t *testing.T) {
	for seed := range uint64(20) {
		steps := keyedStream(seed, 400)
		own, all := run(t, rule(), nil), run(t, rule(), nil)
		all.indexAll = true
		kept := 0
		for i, st := range steps {
			feed(t, own, st)
			feed(t, all, st)
			if a, b := own.Counters(), all.Counters(); a != b {
				t.Fatalf("seed %d, step %d: counters\n own keys %+v\n  indexed %+v", seed, i, a, b)
			}
			if st.pred != nil && st.key == st.pred.RequestId {
				kept++
			}
		}
		a, err := own.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		b, err := all.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		if len(a.Series) != len(b.Series) || len(a.Series) == 0 {
			t.Fatalf("seed %d: %d series, want %d", seed, len(a.Series), len(b.Series))
		}
		for i := range a.Series {
			if string(a.Series[i].Binary) != string(b.Series[i].Binary) || string(a.Series[i].Paired) != string(b.Series[i].Paired) {
				t.Fatalf("seed %d: series %v differs", seed, a.Series[i].Key)
			}
		}
		c := a.Counters
		if c.Joined == 0 || c.Late == 0 || c.Unmatched == 0 || c.DuplicatePredictions == 0 || kept == 0 {
			t.Fatalf("seed %d: the stream does not exercise the join: %+v", seed, c)
		}
	}
}
