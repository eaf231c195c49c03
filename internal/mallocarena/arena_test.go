//go:build linux && cgo

package mallocarena

import (
	"os"
	"testing"
	"unsafe"
)

// A program importing the package has at most two malloc arenas, however
// many threads contend for malloc (glibc would give 32 threads up to
// eight arenas per core), unless its environment set the limit.
func TestTheProcessKeepsTwoArenasUnderContention(t *testing.T) {
	if _, ok := os.LookupEnv("MALLOC_ARENA_MAX"); ok {
		t.Skip("MALLOC_ARENA_MAX is set in the environment: it decides")
	}
	if got := Setting(); got != "2" {
		t.Fatalf("Setting() = %q, want 2", got)
	}
	contend(32)
	if n := arenas(); n < 1 || n > 2 {
		t.Errorf("%d arenas after 32 threads contended for malloc, want 1 or 2", n)
	}
}

// ReadStats follows what C code allocates and frees: 200 blocks of 1 KiB
// (in an arena) and one of 8 MiB (a mapping of its own) raise InUse by
// their size, and freeing them takes it back down; the freed arena blocks
// show in Free until malloc returns them.
func TestReadStatsCountsWhatCAllocatesAndFrees(t *testing.T) {
	before, ok := ReadStats()
	if !ok {
		t.Fatal("ReadStats not ok on linux with cgo")
	}
	const small, n, big = 1 << 10, 200, 8 << 20
	ps := make([]unsafe.Pointer, n)
	for i := range ps {
		ps[i] = cAlloc(small)
	}
	bigp := cAlloc(big)
	held, _ := ReadStats()
	for _, p := range ps {
		cFree(p)
	}
	cFree(bigp)
	after, _ := ReadStats()
	if grew := int64(held.InUse) - int64(before.InUse); grew < n*small+big {
		t.Errorf("InUse grew by %d bytes over %d bytes allocated", grew, n*small+big)
	}
	if mm := int64(held.Mmapped) - int64(before.Mmapped); mm < big {
		t.Errorf("Mmapped grew by %d bytes with a %d-byte block allocated", mm, big)
	}
	if held.Arenas != held.InUse-held.Mmapped+held.Free {
		t.Errorf("Arenas %d != InUse %d - Mmapped %d + Free %d", held.Arenas, held.InUse, held.Mmapped, held.Free)
	}
	// Go's runtime may malloc a little between the reads (cgo, threads).
	if fell := int64(held.InUse) - int64(after.InUse); fell < n*small+big-(64<<10) {
		t.Errorf("InUse fell by %d bytes after %d bytes were freed", fell, n*small+big)
	}
}

// Trim hands back the free pages between allocated chunks, which glibc
// keeps resident by itself: 32 MiB freed below a block still allocated
// stay in RSS (and in Free) until Trim, which takes RSS back down.
func TestTrimReturnsFreePagesBelowAnAllocatedChunk(t *testing.T) {
	const chunk, n = 64 << 10, 512 // 32 MiB in blocks below the mmap threshold, in one heap
	pin := fragment(n, chunk)      // above them: the heap's top cannot shrink past it
	if pin == nil {
		t.Fatal("malloc failed")
	}
	defer cFree(pin)
	freed, _ := ReadStats()
	before := rss()
	if freed.Free < chunk*n*9/10 {
		t.Fatalf("Free %d bytes after %d bytes were freed below a pinned block: glibc returned them by itself", freed.Free, chunk*n)
	}
	if !Trim() {
		t.Error("Trim released nothing")
	}
	after := rss()
	t.Logf("RSS %d MiB before Trim, %d MiB after", before>>20, after>>20)
	if fell := before - after; fell < chunk*n/2 {
		t.Errorf("RSS fell by %d bytes after Trim, with %d bytes free in the arena", fell, chunk*n)
	}
}
