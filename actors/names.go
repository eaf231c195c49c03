package actors

import "sync"

// actorNames hands out the numbers in the model actors' names
// ("model-<n>-<replica>"), reusing a number once every model actor that
// had it has terminated, so that the names in use stay as few as the
// contents alive at once, however many updates come. protoactor's process
// registry is 32,768 Go maps, each of which keeps the memory it took for
// a name's first entry after the name is gone: fresh names every update
// would grow the heap by up to 288 bytes a name until every map holds a
// group (9 MiB). Owned by the supervisor actor.
type actorNames struct {
	next int
	free []int // numbers given back, the last one reused first
}

// take returns a number no living model actor's name has.
func (a *actorNames) take() int {
	if n := len(a.free); n > 0 {
		v := a.free[n-1]
		a.free = a.free[:n-1]
		return v
	}
	a.next++
	return a.next - 1
}

// put gives back a number taken, once its model actors have all terminated.
func (a *actorNames) put(n int) { a.free = append(a.free, n) }

// maxPeerAPIs bounds the API names that requests other nodes forward here
// may label this node's metrics with.
const maxPeerAPIs = 64

// peerAPIs bounds the api label of requests other nodes forward here. A
// forwarded request names the API its caller used, which labels this
// node's per-model metrics as its own requests' do; a faulty peer could
// name a new API in every request and make a new series each time. The
// first maxPeerAPIs names of at most 32 lowercase letters, digits, '-'
// and '_' are kept as they come (Grove's APIs are a handful); any other
// counts as "other".
type peerAPIs struct {
	mu   sync.Mutex
	seen map[string]bool
}

// label is the api label of a request forwarded here as api.
func (p *peerAPIs) label(api string) string {
	if !apiToken(api) {
		return "other"
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen[api] {
		return api
	}
	if len(p.seen) >= maxPeerAPIs {
		return "other"
	}
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	p.seen[api] = true
	return api
}

// apiToken reports whether s is 1 to 32 lowercase letters, digits, '-'
// and '_'.
func apiToken(s string) bool {
	if len(s) == 0 || len(s) > 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
