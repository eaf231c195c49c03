package auth

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// Limit is a token bucket for the identity named Name, or for every
// identity holding Role (each with its own bucket): RPS requests a second
// on average, Burst at once. Name is qualified by its method
// ("jwt:alice", "certificate:bidder.example"), or a token's name alone
// (see ParseQualified).
type Limit struct {
	Name  string
	Role  Role
	RPS   float64
	Burst int
}

// idKey is an identity as the limits key it: its method and its name
// within that method (Identity.Qualified, without building the string).
type idKey struct{ method, name string }

// keyOf is id's key.
func keyOf(id Identity) idKey { return idKey{id.Method, id.Name} }

// limiter keeps a bucket per identity.
type limiter struct {
	byName map[idKey]Limit
	byRole []Limit
	now    func() time.Time
	mu     sync.Mutex
	bucket map[idKey]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
	limit  Limit
}

// maxBuckets is how many buckets are kept before the full ones (which a
// new bucket would equal) are forgotten.
const maxBuckets = 1 << 16

// forgetFull drops the buckets that have refilled by now: forgetting them
// changes nothing, and keeps the map from growing with every identity
// ever seen (JWT subjects, say).
func (l *limiter) forgetFull(now time.Time) {
	for k, b := range l.bucket {
		if b.tokens+now.Sub(b.last).Seconds()*b.limit.RPS >= float64(b.limit.Burst) {
			delete(l.bucket, k)
		}
	}
}

func newLimiter(limits []Limit, now func() time.Time) (*limiter, error) {
	l := &limiter{byName: make(map[idKey]Limit), now: now, bucket: make(map[idKey]*bucket)}
	for i, lim := range limits {
		switch {
		case (lim.Name == "") == (lim.Role == ""):
			return nil, fmt.Errorf("limit %d: set name or role, not both", i+1)
		case !(lim.RPS > 0) || math.IsInf(lim.RPS, 0):
			return nil, fmt.Errorf("limit %d: rps must be a positive number", i+1)
		case lim.Burst < 1:
			return nil, fmt.Errorf("limit %d: burst must be at least 1", i+1)
		}
		if lim.Name != "" {
			method, name, err := ParseQualified(lim.Name)
			if err != nil {
				return nil, fmt.Errorf("limit %d: %w", i+1, err)
			}
			k := idKey{method, name}
			if _, dup := l.byName[k]; dup {
				return nil, fmt.Errorf("limit %d: identity %s has two limits", i+1, Identity{Name: name, Method: method}.Qualified())
			}
			l.byName[k] = lim
			continue
		}
		if _, err := ParseRole(string(lim.Role)); err != nil {
			return nil, fmt.Errorf("limit %d: %v", i+1, err)
		}
		l.byRole = append(l.byRole, lim)
	}
	return l, nil
}

// limitOf is id's limit: the one naming it, else the first listed for a
// role it holds.
func (l *limiter) limitOf(id Identity) (Limit, bool) {
	if lim, ok := l.byName[keyOf(id)]; ok {
		return lim, true
	}
	for _, lim := range l.byRole {
		if id.Has(lim.Role) {
			return lim, true
		}
	}
	return Limit{}, false
}

func (l *limiter) allow(id Identity) (bool, time.Duration) {
	if len(l.byName) == 0 && len(l.byRole) == 0 {
		return true, 0
	}
	lim, ok := l.limitOf(id)
	if !ok {
		return true, 0
	}
	now := l.now()
	key := keyOf(id)
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket[key]
	if b == nil || b.limit != lim {
		if len(l.bucket) >= maxBuckets {
			l.forgetFull(now)
		}
		b = &bucket{tokens: float64(lim.Burst), last: now, limit: lim}
		l.bucket[key] = b
	}
	if dt := now.Sub(b.last).Seconds(); dt > 0 {
		b.tokens = math.Min(float64(lim.Burst), b.tokens+dt*lim.RPS)
	}
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / lim.RPS * float64(time.Second))
	return false, wait
}
