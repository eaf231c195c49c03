package actors

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/groveml/grove/servables"
)

func TestRegisteredModelsServeBesideTheConfigAndAreDeletedOnRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(entry("a/", "", "")), map[string]faultySpec{"a/": version(1)})
		defer w.stop()
		synctest.Wait()
		ctx := context.Background()
		name, data := modelFile(t, "r/", version(9))
		if err := w.sys.RegisterModel(ctx, "r/", map[string][]byte{name: data}, "[[1]]"); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(w.sys.ModelPaths(), ","); got != "a/,r/" {
			t.Fatalf("ModelPaths = %s", got)
		}
		if m := w.model("r/"); !m.Registered || m.State != StateReady {
			t.Fatalf("status of r/: %+v", m)
		}
		w.settle() // a poll of a config without r/ keeps it
		if res := w.infer("r/", 2); res.Err != nil {
			t.Fatalf("registered model after a poll: %v", res.Err)
		}
		for _, tc := range []struct {
			path string
			err  error
		}{{"r/", ErrAlreadyRegistered}, {"a/", ErrManagedByConfig}} {
			err := w.sys.RegisterModel(ctx, tc.path, map[string][]byte{tc.path + "model.faulty": data}, "")
			if !errors.Is(err, tc.err) || servables.KindOf(err) != servables.Conflict {
				t.Errorf("registering %s: %v, want %v", tc.path, err, tc.err)
			}
		}
		if err := w.sys.DeleteModel(ctx, "a/"); !errors.Is(err, ErrManagedByConfig) {
			t.Errorf("deleting a configured model: %v", err)
		}
		if err := w.sys.DeleteModel(ctx, "zz/"); !errors.Is(err, ErrNotRegistered) || servables.KindOf(err) != servables.NotFound {
			t.Errorf("deleting an unknown model: %v", err)
		}
		if err := w.sys.DeleteModel(ctx, "r/"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if res := w.infer("r/", 2); !errors.Is(res.Err, ErrModelNotFound) {
			t.Fatalf("deleted model answered %v", res.Err)
		}
		if w.rt.closed.Load() != 1 {
			t.Fatalf("deleted model not closed (%d closed)", w.rt.closed.Load())
		}
	})
}

func TestRegistrationFailuresAreReportedToTheCallerAndForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(), nil)
		defer w.stop()
		synctest.Wait()
		ctx := context.Background()
		name, broken := modelFile(t, "r/", faultySpec{FailLoad: true})
		err := w.sys.RegisterModel(ctx, "r/", map[string][]byte{name: broken}, "")
		if err == nil || !strings.Contains(err.Error(), "asked to fail loading") {
			t.Fatalf("broken registration: %v", err)
		}
		if len(w.sys.Status().Models) != 0 {
			t.Fatalf("a failed registration is still listed: %+v", w.sys.Status().Models)
		}
		_, good := modelFile(t, "r/", version(1))
		for _, tc := range []struct {
			name, path string
			files      map[string][]byte
			warmUp     string
		}{
			{"absolute path", "/r/", map[string][]byte{"/r/model.faulty": good}, ""},
			{"no files", "r/", nil, ""},
			{"file outside the path", "r/", map[string][]byte{"s/model.faulty": good}, ""},
			{"malformed warm-up", "r/", map[string][]byte{name: good}, "[["},
		} {
			err := w.sys.RegisterModel(ctx, tc.path, tc.files, tc.warmUp)
			if !errors.Is(err, ErrBadRegistration) || servables.KindOf(err) != servables.InvalidInput {
				t.Errorf("%s: %v, want ErrBadRegistration", tc.name, err)
			}
		}
	})
}

func TestTheConfigTakesOverARegisteredPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(t, configJSON(), map[string]faultySpec{"c/": version(2)})
		defer w.stop()
		synctest.Wait()
		name, data := modelFile(t, "c/", version(1))
		if err := w.sys.RegisterModel(context.Background(), "c/", map[string][]byte{name: data}, ""); err != nil {
			t.Fatal(err)
		}
		w.setConfig(configJSON(entry("c/", "", "")))
		m := w.model("c/")
		if m.Registered || m.Checksum != checksumOf(t, "c/", version(2)) {
			t.Fatalf("the config's content does not serve c/: %+v", m)
		}
	})
}

func TestRegisteringWhileTheModelLoadsAndDeletingItTellsTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		gate := make(chan struct{})
		w := newWorld(t, configJSON(), nil, func(w *world, _ *Options) { w.rt.gate = gate })
		defer w.stop()
		synctest.Wait()
		name, data := modelFile(t, "r/", version(1))
		registered := make(chan error, 1)
		go func() {
			registered <- w.sys.RegisterModel(context.Background(), "r/", map[string][]byte{name: data}, "")
		}()
		synctest.Wait() // loading, held by the gate
		if m := w.model("r/"); m.State != StateLoading {
			t.Fatalf("status while loading: %+v", m)
		}
		if err := w.sys.DeleteModel(context.Background(), "r/"); err != nil {
			t.Fatal(err)
		}
		if err := <-registered; !errors.Is(err, errDeletedWhileLoading) {
			t.Fatalf("the registration's caller got %v", err)
		}
		close(gate)
	})
}
