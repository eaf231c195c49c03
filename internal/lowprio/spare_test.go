package lowprio

import (
	"os"
	"runtime"
	"sync"
	"testing"
)

// unsetEnv removes environment variable k for the test and puts it back after.
func unsetEnv(t *testing.T, k string) {
	t.Helper()
	if v, ok := os.LookupEnv(k); ok {
		t.Cleanup(func() { os.Setenv(k, v) })
	}
	os.Unsetenv(k)
}

// keepProcs puts GOMAXPROCS back to what it is now after the test.
func keepProcs(t *testing.T) {
	t.Helper()
	n := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(n) })
}

func TestWithSparePAddsOnePWhileFRunsAndPutsTheSettingBack(t *testing.T) {
	keepProcs(t)
	t.Setenv("GOMAXPROCS", "3")
	runtime.GOMAXPROCS(3)
	var during int
	WithSpareP(func() { during = runtime.GOMAXPROCS(0) })
	if during != 4 {
		t.Errorf("GOMAXPROCS while f ran = %d, want 4", during)
	}
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Errorf("GOMAXPROCS after = %d, want 3", got)
	}
}

func TestWithSparePGivesBackTheRuntimeDefaultOrAValueSetInProcess(t *testing.T) {
	keepProcs(t)
	unsetEnv(t, "GOMAXPROCS")
	runtime.SetDefaultGOMAXPROCS()
	def := runtime.GOMAXPROCS(0)
	s := &spareP{rt: goRuntime{}}
	for _, base := range []int{def, def + 2} {
		if base != def {
			s.setProcs(base)
		}
		var during int
		s.with(func() { during = runtime.GOMAXPROCS(0) })
		if during != base+1 {
			t.Errorf("from %d (default %d): GOMAXPROCS while f ran = %d, want %d", base, def, during, base+1)
		}
		if got := runtime.GOMAXPROCS(0); got != base {
			t.Errorf("from %d (default %d): GOMAXPROCS after = %d, want %d", base, def, got, base)
		}
	}
}

// A GOMAXPROCS set by SetGOMAXPROCS while a spare P is lent (a DeepRec
// handle's initialize while another handle loads), even to the value the
// spare P made, keeps the spare P until the load ends and is the setting
// after it: the last one set wins.
func TestSetGOMAXPROCSWhileASparePIsLentIsTheSettingAfter(t *testing.T) {
	keepProcs(t)
	t.Setenv("GOMAXPROCS", "2")
	runtime.GOMAXPROCS(2)
	s := &spareP{rt: goRuntime{}}
	var during int
	s.with(func() {
		s.setProcs(3)
		during = runtime.GOMAXPROCS(0)
	})
	if during != 4 {
		t.Errorf("GOMAXPROCS while f ran, 3 set meanwhile = %d, want 4", during)
	}
	if got := runtime.GOMAXPROCS(0); got != 3 {
		t.Errorf("GOMAXPROCS after f, 3 set while it ran = %d, want 3", got)
	}
}

func TestOverlappingWithSparePCallsShareOneSpareP(t *testing.T) {
	keepProcs(t)
	t.Setenv("GOMAXPROCS", "2")
	runtime.GOMAXPROCS(2)
	inside := make(chan struct{})
	release := make(chan struct{})
	var wg sync.WaitGroup
	seen := make([]int, 3)
	for i := range seen {
		wg.Go(func() {
			WithSpareP(func() {
				inside <- struct{}{}
				<-release
				seen[i] = runtime.GOMAXPROCS(0)
			})
		})
	}
	for range seen {
		<-inside
	}
	close(release)
	wg.Wait()
	for i, n := range seen {
		if n != 3 {
			t.Errorf("call %d saw GOMAXPROCS %d, want 3", i, n)
		}
	}
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Errorf("GOMAXPROCS after all three = %d, want 2", got)
	}
}

func TestWithSparePPutsTheSettingBackWhenFPanics(t *testing.T) {
	keepProcs(t)
	t.Setenv("GOMAXPROCS", "2")
	runtime.GOMAXPROCS(2)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not reach the caller")
			}
		}()
		WithSpareP(func() { panic("boom") })
	}()
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Errorf("GOMAXPROCS after a panic = %d, want 2", got)
	}
}

func TestRunLendsASpareP(t *testing.T) {
	keepProcs(t)
	t.Setenv("GOMAXPROCS", "2")
	runtime.GOMAXPROCS(2)
	var during int
	_ = Run(Nice, func() { during = runtime.GOMAXPROCS(0) })
	if during != 3 {
		t.Errorf("GOMAXPROCS while Run's f ran = %d, want 3", during)
	}
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Errorf("GOMAXPROCS after Run = %d, want 2", got)
	}
}

func TestWithSparePKeepsASettingMadeWhileFRan(t *testing.T) {
	keepProcs(t)
	t.Setenv("GOMAXPROCS", "2")
	runtime.GOMAXPROCS(2)
	WithSpareP(func() { runtime.GOMAXPROCS(5) })
	if got := runtime.GOMAXPROCS(0); got != 5 {
		t.Errorf("GOMAXPROCS after f set it to 5 = %d, want 5", got)
	}
}

// fakeProcs is a GOMAXPROCS setting of n, custom once set, whose runtime
// default is def.
// sets and defaults count the changes.
type fakeProcs struct {
	n, def         int
	custom         bool
	sets, defaults int
}

func (f *fakeProcs) GOMAXPROCS(n int) int {
	old := f.n
	if n > 0 {
		f.n, f.custom = n, true
		f.sets++
	}
	return old
}

func (f *fakeProcs) SetDefault() { f.n, f.custom = f.def, false; f.defaults++ }

// A CPU limit changed while a load ran (a pod resized in place) is
// followed after it: GOMAXPROCS goes to the new default and follows the
// limit again, rather than staying at the old default for good.
func TestWithSparePFollowsACPULimitChangedWhileFRan(t *testing.T) {
	unsetEnv(t, "GOMAXPROCS")
	f := &fakeProcs{n: 4, def: 4}
	s := &spareP{rt: f}
	var during int
	s.with(func() {
		during = f.n
		f.def = 2 // the limit changes; the runtime holds its update while GOMAXPROCS is set
	})
	if during != 5 {
		t.Errorf("GOMAXPROCS while f ran = %d, want 5", during)
	}
	if f.n != 2 || f.custom {
		t.Errorf("after f: GOMAXPROCS %d (set by hand: %v), want the new default 2, following the limit", f.n, f.custom)
	}
}

// After a load, GOMAXPROCS is what it was set to: the value
// SetGOMAXPROCS gave, else the environment variable's (which the
// runtime's default ignores), each still set by hand; else the runtime's
// default, following the CPU limit again.
func TestWithSparePPutsBackTheSettingItWasGiven(t *testing.T) {
	for _, c := range []struct {
		name, env  string
		set        int
		want       int
		wantCustom bool
	}{
		{"default", "", 0, 4, false},
		{"environment", "3", 0, 3, true},
		{"SetGOMAXPROCS", "3", 6, 6, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			unsetEnv(t, "GOMAXPROCS")
			if c.env != "" {
				t.Setenv("GOMAXPROCS", c.env)
			}
			f := &fakeProcs{n: 4, def: 4}
			s := &spareP{rt: f}
			if c.env != "" {
				f.n, f.custom = 3, true
			}
			s.setProcs(c.set)
			s.with(func() {})
			if f.n != c.want || f.custom != c.wantCustom {
				t.Errorf("after f: GOMAXPROCS %d (set by hand: %v), want %d (%v)", f.n, f.custom, c.want, c.wantCustom)
			}
		})
	}
}

// A hold keeps the spare P until it is released, shared with the
// WithSpareP calls meanwhile, and a second release does nothing: a burst
// of loads under one hold changes GOMAXPROCS twice in all.
func TestHoldSparePKeepsTheSparePUntilReleasedAndSharesItWithTheCallsMeanwhile(t *testing.T) {
	unsetEnv(t, "GOMAXPROCS")
	f := &fakeProcs{n: 2, def: 2}
	s := &spareP{rt: f}
	release := s.hold()
	for range 10 {
		s.with(func() {
			if f.n != 3 {
				t.Errorf("GOMAXPROCS in a call under the hold = %d, want 3", f.n)
			}
		})
	}
	if f.n != 3 || f.sets != 1 {
		t.Errorf("after 10 calls under the hold: GOMAXPROCS %d after %d changes, want 3 after 1", f.n, f.sets)
	}
	release()
	if f.n != 2 || f.custom || f.sets != 1 || f.defaults != 1 {
		t.Errorf("released: GOMAXPROCS %d (set by hand: %v) after %d changes and %d returns to the default, want the default 2 after 1 and 1",
			f.n, f.custom, f.sets, f.defaults)
	}
	s.with(func() {})
	release() // again: must not give back the spare P of a later call, nor count below 0
	if s.running != 0 || f.n != 2 {
		t.Errorf("after a second release and a call: %d running, GOMAXPROCS %d, want 0 and 2", s.running, f.n)
	}
}
