// Package capped reads whole what must stay small, a config or metadata
// file or object, up to a size limit: a larger one, a mistake or written
// by someone else, is an error naming it and the limit instead of memory
// exhausted.
package capped

import (
	"fmt"
	"io"
	"os"
)

// TooLargeError reports content larger than its limit.
type TooLargeError struct {
	// What names the content: `object model_config.json in gs://b`, `config file /etc/grove.yaml`.
	What string
	// Limit is the most bytes it may have.
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s is larger than its limit of %s", e.What, Size(e.Limit))
}

// ReadAll reads r to its end and returns what it read, unless r holds more
// than limit bytes: it then stops after limit+1 and returns a
// *TooLargeError naming what.
func ReadAll(r io.Reader, limit int64, what string) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &TooLargeError{What: what, Limit: limit}
	}
	return data, nil
}

// ReadFile reads the file at path as ReadAll reads a reader; what names
// it in the error of a file larger than limit.
func ReadFile(path string, limit int64, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadAll(f, limit, what)
}

// Size writes a byte count as people read it: "2 GiB", "64 MiB", "4 KiB",
// or "1000 bytes" when it is not a whole number of KiB.
func Size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n == 1:
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}
