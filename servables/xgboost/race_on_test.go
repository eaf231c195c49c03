//go:build race

package xgboost

// raceEnabled: see race_off_test.go.
const raceEnabled = true
