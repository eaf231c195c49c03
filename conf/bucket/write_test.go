package bucket

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// alwaysConflicts is a Writer whose writes always conflict, as if another
// writer always got in first.
type alwaysConflicts struct {
	*Memory
	writes int
}

func (a *alwaysConflicts) WriteObject(context.Context, string, []byte, string) (Attrs, error) {
	a.writes++
	return Attrs{}, fmt.Errorf("test: %w", ErrConflict)
}

func TestUpdateGivesUpAfterLastTry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &alwaysConflicts{Memory: NewMemory("mem", map[string][]byte{"c.json": []byte("{}")})}
		calls := 0
		start := time.Now()
		err := Update(t.Context(), w, "c.json", 1<<20, func(c []byte, _ bool) ([]byte, error) { calls++; return c, nil })
		if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "gave up after 10 attempts") {
			t.Errorf("got %v, want a give-up error wrapping ErrConflict", err)
		}
		if w.writes != UpdateTries || calls != UpdateTries {
			t.Errorf("%d writes, %d change calls; want %d each", w.writes, calls, UpdateTries)
		}
		// The waits grow from 2ms (jittered to [1ms, 3ms)) to at most 250ms.
		if waited := time.Since(start); waited < 400*time.Millisecond || waited > 2*time.Second {
			t.Errorf("waited %v in all between attempts", waited)
		}

		// A cancelled context stops the retries.
		ctx, cancel := context.WithCancel(t.Context())
		w.writes = 0
		err = Update(ctx, w, "c.json", 1<<20, func(c []byte, _ bool) ([]byte, error) { cancel(); return c, nil })
		if !errors.Is(err, context.Canceled) || w.writes != 1 {
			t.Errorf("cancelled: got %v after %d writes", err, w.writes)
		}
	})
}

func TestTurnsAdmitOneUpdatePerObjectAndForgetIdleObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var turns Turns
		release, err := turns.acquire(t.Context(), "a")
		if err != nil {
			t.Fatal(err)
		}
		// Another object's turn is free.
		releaseB, err := turns.acquire(t.Context(), "b")
		if err != nil {
			t.Fatal(err)
		}
		releaseB()
		// The same object's is not until it is released; a waiter whose
		// context ends gives up.
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		if _, err := turns.acquire(ctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("second acquire of a held turn: got %v, want the deadline", err)
		}
		got := make(chan error, 1)
		go func() {
			release2, err := turns.acquire(t.Context(), "a")
			if err == nil {
				release2()
			}
			got <- err
		}()
		synctest.Wait()
		select {
		case err := <-got:
			t.Fatalf("acquired a held turn: %v", err)
		default:
		}
		release()
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		turns.mu.Lock()
		defer turns.mu.Unlock()
		if len(turns.slots) != 0 {
			t.Errorf("%d turn slots left", len(turns.slots))
		}
	})
}
