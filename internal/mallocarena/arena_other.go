//go:build !linux || !cgo

package mallocarena

// Setting says that nothing bounds the arenas: Grove is not built
// against glibc here.
func Setting() string { return "not glibc" }
