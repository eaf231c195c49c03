package forward

// Pick chooses one of n candidates by the power of two choices: it draws
// two distinct candidates at random and takes the one with fewer requests
// in flight (load(i)), the first drawn on a tie. rnd(k) must return a
// number in [0, k). With one candidate it is chosen without drawing; with
// none Pick returns -1.
func Pick(n int, load func(i int) int64, rnd func(k int) int) int {
	switch n {
	case 0:
		return -1
	case 1:
		return 0
	}
	a := rnd(n)
	b := rnd(n - 1)
	if b >= a { // b is drawn among the n-1 candidates other than a
		b++
	}
	if load(b) < load(a) {
		return b
	}
	return a
}
