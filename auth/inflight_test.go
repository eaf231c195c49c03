package auth

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestBeginHoldsEachIdentityToItsRequestsInFlight(t *testing.T) {
	a, err := New(Config{MaxInFlight: 2})
	if err != nil {
		t.Fatal(err)
	}
	tok := Identity{Name: "bidder", Roles: []Role{RoleInfer}, Method: MethodToken}
	sub := Identity{Name: "bidder", Roles: []Role{RoleInfer}, Method: MethodJWT} // another identity
	f1, err1 := a.Begin(tok)
	f2, err2 := a.Begin(tok)
	if err1 != nil || err2 != nil {
		t.Fatalf("the first two requests: %v, %v", err1, err2)
	}
	_, err = a.Begin(tok)
	var tooMany *TooManyInFlightError
	if !errors.As(err, &tooMany) || tooMany.Max != 2 {
		t.Fatalf("a third request in flight: %v, want a TooManyInFlightError of 2", err)
	}
	if msg := err.Error(); !strings.Contains(msg, `"token:bidder" has 2 requests in flight`) || !strings.Contains(msg, "auth.max_inflight_per_identity") {
		t.Errorf("refusal %q should name the caller, its count and the limit", msg)
	}
	if f, err := a.Begin(sub); err != nil {
		t.Errorf("jwt:bidder refused while token:bidder is full: %v", err)
	} else {
		f.End()
	}
	f1.End()
	f3, err := a.Begin(tok)
	if err != nil {
		t.Fatalf("a request after one ended: %v", err)
	}
	f2.End()
	f3.End()
	for i := range 2 {
		if _, err := a.Begin(tok); err != nil {
			t.Fatalf("request %d once all ended: %v", i+1, err)
		}
	}
}

func TestBeginCountsNothingWithoutALimit(t *testing.T) {
	a, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	id := Identity{Name: "x", Method: MethodToken}
	for range 10000 {
		if _, err := a.Begin(id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := New(Config{MaxInFlight: -1}); err == nil {
		t.Error("a negative MaxInFlight was accepted")
	}
}

// Many goroutines of one identity never have more than the limit in
// flight at once, while sweeps forget idle identities under them.
func TestBeginNeverLetsMoreThanTheLimitInFlightUnderSweeps(t *testing.T) {
	f := &inflight{max: 3}
	var (
		mu      sync.Mutex
		in, top int
		wg      sync.WaitGroup
	)
	k := idKey{MethodToken, "busy"}
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				if g == 0 && i%10 == 0 {
					f.sweep()
					continue
				}
				if g == 1 { // idle identities come and go
					n, ok := f.begin(idKey{MethodJWT, fmt.Sprint(i)})
					if ok {
						n.End()
					}
					continue
				}
				n, ok := f.begin(k)
				if !ok {
					continue
				}
				mu.Lock()
				in++
				top = max(top, in)
				mu.Unlock()
				mu.Lock()
				in--
				mu.Unlock()
				n.End()
			}
		})
	}
	wg.Wait()
	if top > 3 {
		t.Errorf("%d requests of one identity were in flight at once, past the limit of 3", top)
	}
	f.sweep()
	if n := f.tracked.Load(); n != 0 {
		t.Errorf("%d identities tracked after every request ended and a sweep, want 0", n)
	}
	count := 0
	f.counts.Range(func(any, any) bool { count++; return true })
	if count != 0 {
		t.Errorf("%d counters left in the map, want 0", count)
	}
}

// A sweep forgets only the identities with nothing in flight: one with a
// request in flight keeps its count.
func TestSweepKeepsTheCountsOfRequestsInFlight(t *testing.T) {
	f := &inflight{max: 1}
	busy, idle := idKey{MethodToken, "busy"}, idKey{MethodToken, "idle"}
	held, ok := f.begin(busy)
	if !ok {
		t.Fatal("the first request was refused")
	}
	n, _ := f.begin(idle)
	n.End()
	f.sweep()
	if _, ok := f.begin(busy); ok {
		t.Error("a sweep forgot a request in flight: a second one was let in past the limit of 1")
	}
	if f.tracked.Load() != 1 {
		t.Errorf("%d identities tracked, want the busy one", f.tracked.Load())
	}
	held.End()
	if _, ok := f.begin(busy); !ok {
		t.Error("refused after the request in flight ended")
	}
}
