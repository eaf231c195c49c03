package servables

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestKindOfFindsTheFirstWrappedSentinel(t *testing.T) {
	unknownContract := NewError(NotFound, "unknown contract")
	for _, tc := range []struct {
		name string
		err  error
		want Kind
	}{
		{"nil", nil, OK},
		{"sentinel itself", ErrOverloaded, Overloaded},
		{"wrapped once", fmt.Errorf("model m/: %w", ErrInvalidInput), InvalidInput},
		{"wrapped twice", fmt.Errorf("batch: %w", fmt.Errorf("%w: output 0", ErrOutput)), OutputUnsupported},
		{"package sentinel keeps its kind", fmt.Errorf("%w a/b/1", unknownContract), NotFound},
		{"first sentinel wins", fmt.Errorf("%w: %w", ErrCrashed, ErrInvalidInput), Crashed},
		{"joined", errors.Join(errors.New("x"), ErrUnavailable), Unavailable},
		{"context deadline", fmt.Errorf("waiting: %w", context.DeadlineExceeded), DeadlineExceeded},
		{"context canceled", context.Canceled, Canceled},
		{"unclassified is execution", errors.New("libtorch said no"), Execution},
		{"unsupported runtime is the caller's", fmt.Errorf("%w: x.pb", ErrUnsupportedRuntime), InvalidInput},
	} {
		if got := KindOf(tc.err); got != tc.want {
			t.Errorf("%s: KindOf(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

func TestPackageSentinelsAreDistinctFromTheKindSentinel(t *testing.T) {
	mine := NewError(NotFound, "unknown release")
	err := fmt.Errorf("%w v2", mine)
	if !errors.Is(err, mine) {
		t.Error("errors.Is does not find the package sentinel")
	}
	if errors.Is(err, ErrNotFound) {
		t.Error("a package sentinel matches ErrNotFound by identity; only KindOf should relate them")
	}
	if got := err.Error(); got != "unknown release v2" {
		t.Errorf("message = %q", got)
	}
}

func TestKindNames(t *testing.T) {
	for k := OK; k <= ReadOnly; k++ {
		if k.String() == "unknown" || k.String() == "" {
			t.Errorf("kind %d has no name", k)
		}
	}
	if Kind(200).String() != "unknown" {
		t.Error("out-of-range kind is not unknown")
	}
}
