package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of the CPU times in /proc: 100 on every
// Linux architecture Go runs on (the kernel converts to it for /proc).
const clockTicks = 100

// cpuReading is the CPU time used so far by grove, by grovebench and by
// the whole machine, read from /proc (Linux only; elsewhere ok is false).
type cpuReading struct {
	at          time.Time
	grove       uint64 // ticks, user + system
	self        uint64 // ticks, user + system
	busy, total uint64 // machine-wide ticks
	ok          bool
}

// readCPU reads the CPU times of process pid, of grovebench and of the machine.
func readCPU(pid int) cpuReading {
	r := cpuReading{at: time.Now()}
	g, err1 := procTicks(fmt.Sprintf("/proc/%d/stat", pid))
	s, err2 := procTicks("/proc/self/stat")
	b, t, err3 := machineTicks()
	if err1 != nil || err2 != nil || err3 != nil {
		return r
	}
	r.grove, r.self, r.busy, r.total, r.ok = g, s, b, t, true
	return r
}

// measureCPU reads the CPU use of process pid and of grovebench over the
// window of length d that starts at from (zero if pid is 0 or ctx ends).
func measureCPU(ctx context.Context, pid int, from time.Time, d time.Duration) cpuUse {
	if pid == 0 || !sleepUntil(ctx, from) {
		return cpuUse{}
	}
	a := readCPU(pid)
	if !sleepUntil(ctx, from.Add(d)) {
		return cpuUse{}
	}
	return cpuBetween(a, readCPU(pid))
}

// cpuUse is what a cpuReading pair says about the time between them.
type cpuUse struct {
	// Grove and Bench are the CPU cores grove and grovebench kept busy on
	// average (1.0 = one core all the time), Other the cores the rest of
	// the machine (other processes, the kernel's own threads) kept busy;
	// Machine is the busy share of all the machine's CPUs (0..1). All are 0
	// when unknown.
	Grove   float64 `json:"grove_cores"`
	Bench   float64 `json:"grovebench_cores"`
	Other   float64 `json:"other_cores"`
	Machine float64 `json:"machine_busy"`
}

// cpuBetween is the CPU use from a to b.
func cpuBetween(a, b cpuReading) cpuUse {
	secs := b.at.Sub(a.at).Seconds()
	if !a.ok || !b.ok || secs <= 0 {
		return cpuUse{}
	}
	u := cpuUse{
		Grove: float64(b.grove-a.grove) / clockTicks / secs,
		Bench: float64(b.self-a.self) / clockTicks / secs,
	}
	if b.total > a.total {
		busy := float64(b.busy - a.busy)
		u.Machine = busy / float64(b.total-a.total)
		u.Other = max(busy/clockTicks/secs-u.Grove-u.Bench, 0)
	}
	return u
}

func procTicks(path string) (uint64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return parseProcStat(string(b))
}

// parseProcStat returns utime + stime of a /proc/PID/stat line. The command
// name (field 2) is in parentheses and may hold spaces and parentheses, so
// fields are counted from the last ')'.
func parseProcStat(s string) (uint64, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("no ')' in %q", clip([]byte(s), 80))
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("utime %q, stime %q", f[11], f[12])
	}
	return u + st, nil
}

func machineTicks() (busy, total uint64, err error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, err
	}
	return parseCPULine(strings.SplitN(string(b), "\n", 2)[0])
}

// parseCPULine reads /proc/stat's aggregate "cpu" line: user nice system
// idle iowait irq softirq steal (guest time is already in user). Busy is
// everything but idle and iowait.
func parseCPULine(line string) (busy, total uint64, err error) {
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("not a /proc/stat cpu line: %q", clip([]byte(line), 80))
	}
	var idle uint64
	for i, s := range f[1:min(len(f), 9)] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/stat cpu field %d: %v", i+1, err)
		}
		total += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	return total - idle, total, nil
}
