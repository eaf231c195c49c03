package onnx

import (
	"fmt"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// InfoCacheSize is how many model contents the InfoCache of the built-in
// runtimes (servables/runtimes) remembers: far more than a node keeps
// loaded, a few hundred bytes each.
const InfoCacheSize = 4096

// InfoCache remembers the inputs and outputs ONNX Runtime reported for
// model contents, by their checksum, at most a fixed number of them (the
// oldest forgotten first). onnxruntime_go needs a session's input and
// output names before it makes the session, so Load otherwise makes a
// session only to read them, about as costly as the model's own: an
// on-demand model loaded again after an unload skips it. Safe for
// concurrent use.
type InfoCache struct {
	mu    sync.Mutex
	max   int
	m     map[string]ioInfo
	order []string // checksums, oldest first
	// hits and misses count the reads that found a content and those that
	// made a session (Stats).
	hits, misses int
}

// ioInfo is one content's inputs and outputs, never changed once stored.
type ioInfo struct{ ins, outs []ort.InputOutputInfo }

// NewInfoCache returns an InfoCache of at most size contents (at least 1).
func NewInfoCache(size int) *InfoCache {
	return &InfoCache{max: max(size, 1), m: make(map[string]ioInfo)}
}

// Stats returns how many reads found their content and how many read the
// model file.
func (c *InfoCache) Stats() (hits, misses int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hits, c.misses
}

// read returns the inputs and outputs of the model at file, whose content
// has checksum sum: remembered, or read from a one-thread session made as
// the model's is (one with graph optimisations disabled would load faster,
// but left glibc's heap growing by about 100 kB per load of pCTR: see
// TestLoadCloseCyclesDoNotLeak) and then remembered. A nil cache, or an
// empty sum, always reads.
func (c *InfoCache) read(file, sum string) (ins, outs []ort.InputOutputInfo, err error) {
	if c != nil && sum != "" {
		c.mu.Lock()
		info, ok := c.m[sum]
		if ok {
			c.hits++
		} else {
			c.misses++
		}
		c.mu.Unlock()
		if ok {
			return info.ins, info.outs, nil
		}
	}
	desc, err := sessionOptions(1)
	if err != nil {
		return nil, nil, fmt.Errorf("onnx: session options: %w", err)
	}
	ins, outs, err = ort.GetInputOutputInfoWithOptions(file, desc)
	desc.Destroy()
	if err != nil {
		return nil, nil, loadError(file, err)
	}
	if c != nil && sum != "" {
		c.put(sum, ioInfo{ins, outs})
	}
	return ins, outs, nil
}

// put remembers info for sum, forgetting the oldest content when full.
func (c *InfoCache) put(sum string, info ioInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[sum]; ok {
		return
	}
	for len(c.order) >= c.max {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[sum] = info
	c.order = append(c.order, sum)
}
