//go:build !linux

package etcdtest

import (
	"errors"
	"os"
)

// freeze is not available outside Linux.
func freeze(*os.Process) error { return errors.New("etcdtest: Freeze needs Linux") }
