//go:build linux && cgo

// Package mallocarena bounds how many malloc arenas glibc keeps in a
// program that imports it: two, unless the environment says otherwise
// (MALLOC_ARENA_MAX, or glibc.malloc.arena_max in GLIBC_TUNABLES).
//
// glibc gives each new thread an arena of its own, up to eight per core,
// and memory freed in one arena is never reused by another. The model
// runtimes (libtorch, ONNX Runtime) allocate on whatever OS threads Go
// runs them on, so every in-place update of a model leaves a little of
// its memory resident in one arena or another: RSS crept by 11–18 KiB per
// update of two small models with glibc's default, and by about 2 KiB
// with two arenas (docs/performance.md). The limit is set by a C
// constructor, before the Go runtime starts any thread: set later, it
// would leave the arenas threads already made.
//
// ReadStats reports glibc's own accounting of the C heap (mallinfo2):
// what the program's C and C++ code holds allocated, and what malloc
// keeps free without returning it to the system. Go's memory is not
// malloc'd and is not in it.
package mallocarena

/*
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// grove_arena_limit is the M_ARENA_MAX the constructor set (0: none).
static int grove_arena_limit = 0;

static int env_sets_arenas(void) {
	const char *t = getenv("GLIBC_TUNABLES");
	return getenv("MALLOC_ARENA_MAX") != NULL || (t != NULL && strstr(t, "glibc.malloc.arena_max") != NULL);
}

__attribute__((constructor)) static void grove_limit_arenas(void) {
	if (!env_sets_arenas() && mallopt(M_ARENA_MAX, 2) == 1) grove_arena_limit = 2;
}

static int arena_limit(void) { return grove_arena_limit; }

// heap_stats fills in glibc's accounting of every arena (mallinfo2).
static void heap_stats(size_t *inuse, size_t *free_, size_t *mmapped, size_t *system) {
	struct mallinfo2 mi = mallinfo2();
	*inuse = mi.uordblks + mi.hblkhd;
	*free_ = mi.fordblks;
	*mmapped = mi.hblkhd;
	*system = mi.arena;
}

// arenas returns how many arenas malloc_info lists (one <heap> each).
static int arenas(void) {
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (f == NULL) return -1;
	malloc_info(0, f);
	fclose(f);
	int n = 0;
	for (char *p = buf; (p = strstr(p, "<heap nr=")) != NULL; p++) n++;
	free(buf);
	return n;
}

static int trim(void) { return malloc_trim(0); }

// rss_bytes is the process's resident set size, from /proc/self/statm.
static long rss_bytes(void) {
	FILE *f = fopen("/proc/self/statm", "r");
	if (f == NULL) return -1;
	long size = 0, resident = 0;
	int n = fscanf(f, "%ld %ld", &size, &resident);
	fclose(f);
	return n == 2 ? resident * sysconf(_SC_PAGESIZE) : -1;
}

// fragment allocates and touches n blocks of size bytes, then one more
// above them, frees the n blocks and returns the last one: all on one
// thread, so in one arena.
static void *fragment(int n, size_t size) {
	void **ps = malloc(n * sizeof(void *));
	if (ps == NULL) return NULL;
	for (int i = 0; i < n; i++) {
		ps[i] = malloc(size);
		if (ps[i] != NULL) memset(ps[i], 1, size);
	}
	void *pin = malloc(size); // no free chunk fits it yet: it comes from the top
	for (int i = 0; i < n; i++) free(ps[i]);
	free(ps);
	return pin;
}

static void *c_alloc(size_t n) {
	char *p = malloc(n);
	if (p != NULL) memset(p, 1, n);
	return p;
}

static void *churn(void *arg) {
	(void)arg;
	for (int i = 0; i < 20000; i++) {
		void *p = malloc(64 + i % 4096);
		free(p);
	}
	return NULL;
}

// contend runs n threads (at most 64) that malloc and free at once.
static void contend(int n) {
	pthread_t t[64];
	if (n > 64) n = 64;
	for (int i = 0; i < n; i++) pthread_create(&t[i], NULL, churn, NULL);
	for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
}
*/
import "C"

import (
	"fmt"
	"os"
	"unsafe"
)

// Setting says what bounds the arenas, for the start-up log: "2" (this
// package), "MALLOC_ARENA_MAX=4" or "GLIBC_TUNABLES=..." (the
// environment), or "glibc default" if mallopt refused.
func Setting() string {
	if n := C.arena_limit(); n > 0 {
		return fmt.Sprint(int(n))
	}
	if v, ok := os.LookupEnv("MALLOC_ARENA_MAX"); ok {
		return "MALLOC_ARENA_MAX=" + v
	}
	if v, ok := os.LookupEnv("GLIBC_TUNABLES"); ok {
		return "GLIBC_TUNABLES=" + v
	}
	return "glibc default"
}

// Stats is glibc's accounting of the C heap, in bytes.
type Stats struct {
	// InUse is what the program holds allocated: in the arenas
	// (mallinfo2's uordblks) and in chunks of their own mapping (hblkhd).
	// Chunks a thread's cache (tcache) holds count as in use.
	InUse uint64
	// Free is what the arenas hold free, not returned to the system
	// (fordblks): what fragmentation or retention keeps resident at most.
	Free uint64
	// Mmapped is the share of InUse in chunks of their own mapping
	// (hblkhd), which free returns to the system at once.
	Mmapped uint64
	// Arenas is what the arenas took from the system (arena): the
	// arenas' share of InUse plus Free.
	Arenas uint64
}

// ReadStats returns glibc's accounting of the C heap (mallinfo2). It
// walks every arena's free lists under the arena's lock: cheap enough at
// a metrics scrape, not on a hot path. ok is false where Grove is not
// built against glibc.
func ReadStats() (s Stats, ok bool) {
	var inuse, free, mmapped, system C.size_t
	C.heap_stats(&inuse, &free, &mmapped, &system)
	return Stats{InUse: uint64(inuse), Free: uint64(free), Mmapped: uint64(mmapped), Arenas: uint64(system)}, true
}

// Trim returns the whole free pages the arenas hold to the system
// (malloc_trim(0)): the free chunks between allocated ones, which glibc
// keeps resident otherwise (it trims only the top of each heap by
// itself). It walks every arena under its lock, taking about a
// millisecond per hundred megabytes of heap; released reports whether
// any memory went back. Where Grove is not built against glibc it does
// nothing.
func Trim() (released bool) { return C.trim() == 1 }

// fragment leaves n freed blocks of size bytes below one still
// allocated, which it returns (cFree it).
func fragment(n, size int) unsafe.Pointer { return C.fragment(C.int(n), C.size_t(size)) }

// rss is the process's resident set size in bytes (-1 if unknown).
func rss() int64 { return int64(C.rss_bytes()) }

// arenas returns how many malloc arenas the process has (-1 if unknown).
func arenas() int { return int(C.arenas()) }

// cAlloc allocates n bytes with C's malloc and touches them; cFree frees
// what it returned.
func cAlloc(n int) unsafe.Pointer { return C.c_alloc(C.size_t(n)) }
func cFree(p unsafe.Pointer)      { C.free(p) }

// contend runs n C threads (at most 64) that malloc and free at once, so
// that glibc makes the arenas it may.
func contend(n int) { C.contend(C.int(n)) }
