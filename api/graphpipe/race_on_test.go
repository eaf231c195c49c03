//go:build race

package graphpipe

// raceEnabled: see race_off_test.go.
const raceEnabled = true
