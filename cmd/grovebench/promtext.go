package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// promSample is one line of the Prometheus text exposition format.
type promSample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// promSnapshot is one scrape of /metrics.
type promSnapshot []promSample

// parseProm parses the Prometheus text exposition format (what grove's
// GET /metrics serves): comments and blank lines are skipped, a trailing
// timestamp is ignored, label values may hold \" \\ and \n escapes. A line
// that cannot be parsed is an error.
func parseProm(r io.Reader) (promSnapshot, error) {
	var out promSnapshot
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		s, err := parsePromLine(line)
		if err != nil {
			return nil, fmt.Errorf("metrics line %d %q: %v", n, clip([]byte(line), 120), err)
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

func parsePromLine(line string) (promSample, error) {
	s := promSample{Labels: map[string]string{}}
	i := strings.IndexAny(line, "{ \t")
	if i <= 0 {
		return s, fmt.Errorf("no value")
	}
	s.Name, line = line[:i], line[i:]
	if line[0] == '{' {
		line = line[1:]
		for {
			line = strings.TrimLeft(line, " \t,")
			if line == "" {
				return s, fmt.Errorf("unterminated labels")
			}
			if line[0] == '}' {
				line = line[1:]
				break
			}
			eq := strings.IndexByte(line, '=')
			if eq <= 0 || len(line) < eq+2 || line[eq+1] != '"' {
				return s, fmt.Errorf("bad label")
			}
			name := strings.TrimSpace(line[:eq])
			line = line[eq+2:]
			var val strings.Builder
			closed := false
			for j := 0; j < len(line); j++ {
				c := line[j]
				if c == '\\' && j+1 < len(line) {
					j++
					switch line[j] {
					case 'n':
						val.WriteByte('\n')
					default:
						val.WriteByte(line[j])
					}
					continue
				}
				if c == '"' {
					line, closed = line[j+1:], true
					break
				}
				val.WriteByte(c)
			}
			if !closed {
				return s, fmt.Errorf("unterminated label value")
			}
			s.Labels[name] = val.String()
		}
	}
	f := strings.Fields(line)
	if len(f) < 1 || len(f) > 2 {
		return s, fmt.Errorf("want a value and an optional timestamp")
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return s, err
	}
	s.Value = v
	return s, nil
}

// matches reports whether s has every label of match with the same value.
func (s promSample) matches(name string, match map[string]string) bool {
	if s.Name != name {
		return false
	}
	for k, v := range match {
		if s.Labels[k] != v {
			return false
		}
	}
	return true
}

// sum adds the values of the samples of name that carry match's labels
// (0 when there are none: a counter not incremented yet is not exported).
func (p promSnapshot) sum(name string, match map[string]string) float64 {
	t := 0.0
	for _, s := range p {
		if s.matches(name, match) {
			t += s.Value
		}
	}
	return t
}

// promBucket is one cumulative histogram bucket.
type promBucket struct {
	LE    float64 `json:"le"`
	Count float64 `json:"count"`
}

// buckets returns the cumulative buckets of histogram name (without the
// _bucket suffix) whose series carry match's labels, summed per upper bound
// and ordered by it.
func (p promSnapshot) buckets(name string, match map[string]string) []promBucket {
	byLE := map[float64]float64{}
	for _, s := range p {
		if !s.matches(name+"_bucket", match) {
			continue
		}
		le, err := strconv.ParseFloat(s.Labels["le"], 64)
		if err != nil {
			continue
		}
		byLE[le] += s.Value
	}
	out := make([]promBucket, 0, len(byLE))
	for le, c := range byLE {
		out = append(out, promBucket{le, c})
	}
	slices.SortFunc(out, func(a, b promBucket) int {
		switch {
		case a.LE < b.LE:
			return -1
		case a.LE > b.LE:
			return 1
		}
		return 0
	})
	return out
}

// bucketsDelta is after minus before, bucket by bucket (a bucket missing
// from before counts as 0 there): the observations between two scrapes.
func bucketsDelta(before, after []promBucket) []promBucket {
	prev := map[float64]float64{}
	for _, b := range before {
		prev[b.LE] = b.Count
	}
	out := make([]promBucket, len(after))
	for i, b := range after {
		out[i] = promBucket{b.LE, b.Count - prev[b.LE]}
	}
	return out
}

// histBound returns the upper bound of the bucket that holds the q-th
// quantile (0 < q ≤ 1) of cumulative buckets, i.e. the smallest bound with
// at least q of the observations at or below it; ok is false when there are
// no observations. The bound may be +Inf. Unlike histogram_quantile it does
// not interpolate: with Grove's coarse buckets an honest "≤ bound" says more.
func histBound(b []promBucket, q float64) (bound float64, ok bool) {
	if len(b) == 0 {
		return 0, false
	}
	total := b[len(b)-1].Count
	if total <= 0 {
		return 0, false
	}
	rank := q * total
	for _, x := range b {
		if x.Count >= rank-1e-9 {
			return x.LE, true
		}
	}
	return math.Inf(1), true
}

// fetchProm scrapes baseURL/metrics.
func fetchProm(ctx context.Context, client *http.Client, baseURL string) (promSnapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET /metrics: HTTP %d: %s", resp.StatusCode, clip(b, 200))
	}
	return parseProm(resp.Body)
}
