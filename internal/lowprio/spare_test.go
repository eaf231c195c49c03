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
	for _, base := range []int{def, def + 2} {
		runtime.GOMAXPROCS(base)
		var during int
		WithSpareP(func() { during = runtime.GOMAXPROCS(0) })
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
