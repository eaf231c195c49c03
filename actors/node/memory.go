package node

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// availableQuantum is the granularity of the machine's available memory in
// a member record: rounding it down keeps the record from being rewritten
// (and the placement recomputed) for every page the machine allocates.
const availableQuantum = 16 << 20

// FreeBytes is the free memory a node reports in its member record: its
// budget less what the contents it holds ready use (each one's measured
// RSS growth, else its file size × the memory factor), never below 0, and
// never above available, the memory the machine or container has left,
// when that is known (available < 0: unknown).
func FreeBytes(budget, used, available int64) int64 {
	free := max(budget-used, 0)
	if available >= 0 {
		free = min(free, available/availableQuantum*availableQuantum)
	}
	return free
}

// SystemAvailable reads the memory this process could still take: the
// smaller of the kernel's MemAvailable (/proc/meminfo) and, under a
// cgroup v2 memory limit, the limit less the cgroup's working set
// (memory.current less inactive_file, the page cache the kernel reclaims
// first, as the kubelet counts it). It returns -1 when neither can be read
// (not Linux).
func SystemAvailable() int64 {
	avail := int64(-1)
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		if v, err := ParseMemAvailable(data); err == nil {
			avail = v
		}
	}
	const cg = "/sys/fs/cgroup/"
	limit, err1 := os.ReadFile(cg + "memory.max")
	current, err2 := os.ReadFile(cg + "memory.current")
	stat, err3 := os.ReadFile(cg + "memory.stat")
	if err1 == nil && err2 == nil && err3 == nil {
		if v, limited, err := CgroupHeadroom(limit, current, stat); err == nil && limited && (avail < 0 || v < avail) {
			avail = v
		}
	}
	return avail
}

// ParseMemAvailable returns MemAvailable, in bytes, from the text of
// /proc/meminfo.
func ParseMemAvailable(meminfo []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("meminfo: MemAvailable line %q is not \"<n> kB\"", sc.Text())
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 || kb > 1<<53 {
			return 0, fmt.Errorf("meminfo: MemAvailable %q is not a size in kB", f[0])
		}
		return kb << 10, nil
	}
	return 0, errors.New("meminfo: no MemAvailable line")
}

// CgroupHeadroom returns a cgroup v2 memory limit less the cgroup's
// working set, from the contents of memory.max, memory.current and
// memory.stat: limited is false when memory.max is "max" (no limit). The
// working set is memory.current less inactive_file; the headroom is 0
// when the working set is at or above the limit.
func CgroupHeadroom(maxFile, currentFile, statFile []byte) (headroom int64, limited bool, err error) {
	lim := strings.TrimSpace(string(maxFile))
	if lim == "max" {
		return 0, false, nil
	}
	limit, err := strconv.ParseInt(lim, 10, 64)
	if err != nil || limit < 0 {
		return 0, false, fmt.Errorf("cgroup memory.max %q is neither a size in bytes nor \"max\"", lim)
	}
	cur := strings.TrimSpace(string(currentFile))
	current, err := strconv.ParseInt(cur, 10, 64)
	if err != nil || current < 0 {
		return 0, false, fmt.Errorf("cgroup memory.current %q is not a size in bytes", cur)
	}
	var inactive int64
	sc := bufio.NewScanner(bytes.NewReader(statFile))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "inactive_file "); ok {
			if inactive, err = strconv.ParseInt(strings.TrimSpace(v), 10, 64); err != nil || inactive < 0 {
				return 0, false, fmt.Errorf("cgroup memory.stat inactive_file %q is not a size in bytes", v)
			}
		}
	}
	working := max(current-min(inactive, current), 0)
	return max(limit-working, 0), true, nil
}
