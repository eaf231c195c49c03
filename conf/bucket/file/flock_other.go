//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package file

import (
	"context"
	"errors"
	"os"
)

// lockFile is not implemented where flock(2) is missing, so file buckets
// there are read-only.
func lockFile(ctx context.Context, root *os.Root, name string) (unlock func(), err error) {
	return nil, errors.ErrUnsupported
}
