//go:build !linux

package lowprio

func lockThread() {}

func lower(int) error { return ErrUnsupported }
