package main

import (
	"errors"
	"math"
	"testing"
)

func TestCompareAcceptsDifferencesWithinTolerance(t *testing.T) {
	got := []float32{0.5, 1000.0005, -3e-7}
	want := []float32{0.5000005, 1000, 0}
	if err := compare("prediction", got, want); err != nil {
		t.Fatal(err)
	}
}

func TestCompareRejectsDifferencesBeyondTolerance(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want []float32
	}{
		{"absolute below 1", []float32{0.5, 0.25}, []float32{0.5, 0.250002}},
		{"relative above 1", []float32{1000.002}, []float32{1000}},
		{"NaN from Grove", []float32{float32(math.NaN())}, []float32{0}},
		{"lengths", []float32{1, 2}, []float32{1}},
	} {
		if err := compare("margin", c.got, c.want); !errors.Is(err, errDisagree) {
			t.Errorf("%s: compare(%v, %v) = %v, want errDisagree", c.name, c.got, c.want, err)
		}
	}
}

func TestParseBatchesRefusesNonPositiveSizes(t *testing.T) {
	got, err := parseBatches("1, 16,256")
	if err != nil || len(got) != 3 || got[0] != 1 || got[1] != 16 || got[2] != 256 {
		t.Fatalf("parseBatches(\"1, 16,256\") = %v, %v", got, err)
	}
	for _, s := range []string{"0", "1,-2", "x", ""} {
		if _, err := parseBatches(s); err == nil {
			t.Errorf("parseBatches(%q) accepted", s)
		}
	}
}
