//go:build !linux || !cgo

package mallocarena

// Setting says that nothing bounds the arenas: Grove is not built
// against glibc here.
func Setting() string { return "not glibc" }

// Stats is glibc's accounting of the C heap, in bytes (see the Linux
// build); here every figure is zero.
type Stats struct {
	InUse, Free, Mmapped, Arenas uint64
}

// ReadStats reports that there is no glibc accounting here (ok false).
func ReadStats() (s Stats, ok bool) { return Stats{}, false }

// Trim does nothing here (no glibc): it reports that nothing was released.
func Trim() (released bool) { return false }
