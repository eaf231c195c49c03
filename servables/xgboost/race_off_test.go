//go:build !race

package xgboost

// raceEnabled is true under -race, which makes sync.Pool drop items at
// random: the tests that count allocations skip themselves then.
const raceEnabled = false
