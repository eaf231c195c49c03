package join

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/groveml/grove/grovepb"
)

// keyedStream is a script of requests logged under record keys of every
// kind: mostly their own request_id, sometimes a neighbouring request's
// request_id, a key shared by other requests (a user's), or none; of one
// or two items and rows,
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
	keyOf := func(i int) string {
		switch x := rng.Float64(); {
		case x < 0.6:
			return fmt.Sprintf("r%d", i)
		case x < 0.7:
			return fmt.Sprintf("r%d", max(0, i+rng.IntN(3)-1)) // a neighbour's, or its own
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
				st := step{pred: ev, key: keyOf(i)}
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

// indexEntries is the number of record keys' index entries in s.
func indexEntries(t *testing.T, s Store) int {
	t.Helper()
	n := 0
	count := func(key string, _ int64, _ []byte) error {
		if key[0] == prefixKey {
			n++
		}
		return nil
	}
	var err error
	switch s := s.(type) {
	case *MemStore:
		_, _, err = s.scan(nil, math.MaxInt, count)
	case *PebbleStore:
		_, _, err = s.scan(nil, math.MaxInt, count)
	case *TieredStore:
		sc := s.Scan()
		for done := false; !done && err == nil; {
			done, err = sc.Next(math.MaxInt, count)
		}
	default:
		t.Fatalf("store %T", s)
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A request's own join key standing for its record key's index entry
// (indexKey) is a way of storing the index, not of joining: over streams
// with every kind of record key, the Joiner's counters after every step
// and its results at the end are those of a Joiner that indexes every
// join key, in memory, over a tiered store that spills to pebble, and
// over pebble restored from a checkpoint halfway; and the own keys store
// fewer index entries.
func TestOwnKeysJoinAsAnIndexOfEveryKey(t *testing.T) {
	for seed := range uint64(20) {
		steps := keyedStream(seed, 400)
		all := run(t, rule(), nil)
		all.indexAll = true
		p, err := OpenPebble(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		// A tiered store with room for a few hundred entries in memory.
		spill, err := OpenPebble(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		tiered := NewTieredStore(20_000, spill)
		dir := t.TempDir()
		restored, err := OpenPebble(dir)
		if err != nil {
			t.Fatal(err)
		}
		runs := []struct {
			name  string
			store Store
			j     *Joiner
		}{{name: "memory", store: NewMemStore()}, {name: "tiered", store: tiered}, {name: "pebble", store: p},
			{name: "pebble restored halfway", store: restored}}
		if seed >= 4 { // the stores on disk: the first seeds only
			runs = runs[:1]
		}
		for i := range runs {
			runs[i].j = run(t, rule(), runs[i].store)
		}
		restore := len(steps) / 2
		kept, neighbours := 0, 0
		ownIndex, allIndex := 0, 0
		for i, st := range steps {
			if i == restore && len(runs) > 1 {
				r := &runs[len(runs)-1]
				cp, err := r.j.Checkpoint()
				if err != nil {
					t.Fatal(err)
				}
				if err := restored.Sync(); err != nil {
					t.Fatal(err)
				}
				if err := restored.Close(); err != nil {
					t.Fatal(err)
				}
				if restored, err = OpenPebble(dir); err != nil {
					t.Fatal(err)
				}
				r.store = restored
				if r.j, err = New(Options{Rules: []Rule{{Contract: contract, Outcomes: rule()}}, Store: restored}); err != nil {
					t.Fatal(err)
				}
				if err := r.j.Restore(cp); err != nil {
					t.Fatal(err)
				}
			}
			feed(t, all, st)
			want := all.Counters()
			for _, r := range runs {
				feed(t, r.j, st)
				if got := r.j.Counters(); got != want {
					t.Fatalf("seed %d, step %d, %s: counters\n own keys %+v\n  indexed %+v", seed, i, r.name, got, want)
				}
			}
			if i%25 == 0 {
				ownIndex += indexEntries(t, runs[0].store)
				allIndex += indexEntries(t, all.store)
				if n := indexEntries(t, tiered); len(runs) > 1 && n != indexEntries(t, runs[0].store) {
					t.Fatalf("seed %d, step %d: %d index entries tiered, %d in memory", seed, i, n, indexEntries(t, runs[0].store))
				}
			}
			if st.pred != nil && st.key == st.pred.RequestId {
				kept++
			} else if st.pred != nil && strings.HasPrefix(st.key, "r") {
				neighbours++
			}
		}
		b, err := all.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			a, err := r.j.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Series) != len(b.Series) || len(a.Series) == 0 {
				t.Fatalf("seed %d, %s: %d series, want %d", seed, r.name, len(a.Series), len(b.Series))
			}
			for i := range a.Series {
				if string(a.Series[i].Binary) != string(b.Series[i].Binary) || string(a.Series[i].Paired) != string(b.Series[i].Paired) {
					t.Fatalf("seed %d, %s: series %v differs", seed, r.name, a.Series[i].Key)
				}
			}
		}
		c := b.Counters
		if c.Joined == 0 || c.Late == 0 || c.Unmatched == 0 || c.DuplicatePredictions == 0 || kept == 0 || neighbours == 0 {
			t.Fatalf("seed %d: the stream does not exercise the join: %+v, %d own keys, %d neighbours'", seed, c, kept, neighbours)
		}
		// The own keys stood for index entries: at most a little over half
		// as many as with every key indexed.
		if ownIndex*3 > allIndex*2 {
			t.Fatalf("seed %d: %d index entries with own keys, %d with every key indexed", seed, ownIndex, allIndex)
		}
		if len(runs) > 1 && !tiered.spilled {
			t.Fatalf("seed %d: the tiered store never spilled to disk", seed)
		}
		for _, s := range []*PebbleStore{p, spill, restored} {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
