package actors

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
