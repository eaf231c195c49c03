package bucket

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/groveml/grove/internal/capped"
)

// Writer is a Bucket that can also replace objects conditionally, which is
// what optimistic concurrency between replicas needs. The buckets of every
// driver implement it; code that only reads keeps taking a Bucket.
type Writer interface {
	Bucket
	// WriteObject replaces the named object's content with data, creating
	// the object if needed, but only if the object is still at version
	// ifVersion: "" means "only if the object does not exist", any other
	// value "only if its current version is exactly this one" (as returned
	// by ReadObject or a previous WriteObject). If the condition does not
	// hold, nothing is written and the error wraps ErrConflict. On success
	// it returns the attributes of the new version.
	WriteObject(ctx context.Context, name string, data []byte, ifVersion string) (Attrs, error)
}

// ErrConflict is wrapped by the errors of conditional writes whose
// version precondition failed: someone else wrote the object (or created
// it) since the caller read it.
var ErrConflict = errors.New("object changed concurrently (version precondition failed)")

// ContentTooLargeError is Update's error when change returns new content
// larger than the limit: nothing was written. It is the caller's change
// that is too large, where a *capped.TooLargeError alone is an object
// already too large to read.
type ContentTooLargeError struct {
	// Err names the object and the limit.
	Err *capped.TooLargeError
}

func (e *ContentTooLargeError) Error() string { return e.Err.Error() }

// Unwrap returns Err.
func (e *ContentTooLargeError) Unwrap() error { return e.Err }

// UpdateTries is how many read-modify-write attempts Update makes before
// giving up on a contended object.
const UpdateTries = 10

// Update sets the named object to change(current content) with optimistic
// concurrency: it reads the object and its version, calls change, and
// writes the result on condition that the version is unchanged. On a
// conflict it waits a short jittered, growing delay and starts again from a
// fresh read, up to UpdateTries attempts; after the last it returns an
// error wrapping ErrConflict. So concurrent Updates of one object, in this
// process, other processes or other replicas, never lose each other's
// changes.
//
// The object is read with ReadObject's limit, limit (an object larger is
// a *capped.TooLargeError), and new content larger than limit is not
// written (a *ContentTooLargeError, which wraps a *capped.TooLargeError):
// what Update writes, it and every reader with that limit can read back.
//
// change gets the current content and whether the object exists (current
// is nil if not) and returns the new content. It may be called several
// times, once per attempt, so it must not have side effects; the content
// it gets must not be modified or retained. If change returns an error,
// Update returns it (wrapped) without writing.
//
// Updates of one object through the same Writer value take turns within
// the process if the Writer embeds Turns (every driver's does), so a
// replica's own concurrent updates do not make each other retry; conflicts,
// and retries, only come from other processes.
func Update(ctx context.Context, b Writer, name string, limit int64, change func(current []byte, exists bool) ([]byte, error)) error {
	if tt, ok := b.(turnTaker); ok && tt.updateTurns() != nil {
		release, err := tt.updateTurns().acquire(ctx, name)
		if err != nil {
			return fmt.Errorf("updating %s in %s: %w", name, b, err)
		}
		defer release()
	}
	delay := 2 * time.Millisecond
	for try := 1; ; try++ {
		current, attrs, err := b.ReadObject(ctx, name, limit)
		exists := true
		switch {
		case errors.Is(err, ErrNotExist):
			current, attrs, exists = nil, Attrs{}, false
		case err != nil:
			return fmt.Errorf("updating %s in %s: %w", name, b, err)
		}
		next, err := change(current, exists)
		if err != nil {
			return fmt.Errorf("updating %s in %s: %w", name, b, err)
		}
		if int64(len(next)) > limit {
			return fmt.Errorf("updating %s in %s: %w", name, b, &ContentTooLargeError{&capped.TooLargeError{What: "the new content of " + name, Limit: limit}})
		}
		_, err = b.WriteObject(ctx, name, next, attrs.Version)
		if err == nil {
			return nil
		}
		if !errors.Is(err, ErrConflict) {
			return fmt.Errorf("updating %s in %s: %w", name, b, err)
		}
		if try == UpdateTries {
			return fmt.Errorf("updating %s in %s: gave up after %d attempts, the object kept changing: %w", name, b, try, err)
		}
		// Full jitter in [delay/2, 3*delay/2) spreads out contending writers.
		wait := delay/2 + rand.N(delay)
		select {
		case <-ctx.Done():
			return fmt.Errorf("updating %s in %s: %w (after %d conflicting attempts)", name, b, ctx.Err(), try)
		case <-time.After(wait):
		}
		delay = min(2*delay, 250*time.Millisecond)
	}
}

// turnTaker is a Writer whose Updates of one object take turns within
// the process: one that embeds Turns.
type turnTaker interface {
	updateTurns() *Turns
}

// Turns makes the Updates of each object through one Writer take turns
// within the process: a driver's bucket type embeds it (by value, in a
// struct used through a pointer) to opt in. The zero value is ready to use.
type Turns struct {
	mu    sync.Mutex
	slots map[string]*turnSlot
}

func (t *Turns) updateTurns() *Turns { return t }

// turnSlot is an object's turn (a one-token semaphore) and the number of
// Updates holding or waiting for it, to forget it when there are none.
type turnSlot struct {
	token chan struct{}
	users int
}

// acquire waits for k's turn, or for ctx to be done.
func (t *Turns) acquire(ctx context.Context, k string) (release func(), err error) {
	t.mu.Lock()
	if t.slots == nil {
		t.slots = map[string]*turnSlot{}
	}
	s := t.slots[k]
	if s == nil {
		s = &turnSlot{token: make(chan struct{}, 1)}
		t.slots[k] = s
	}
	s.users++
	t.mu.Unlock()
	leave := func() {
		t.mu.Lock()
		if s.users--; s.users == 0 {
			delete(t.slots, k)
		}
		t.mu.Unlock()
	}
	select {
	case s.token <- struct{}{}:
		return func() { <-s.token; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}
