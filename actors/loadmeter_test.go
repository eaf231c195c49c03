package actors

import "testing"

func TestLoadMeterMeasuresOnlyALoadThatRanAlone(t *testing.T) {
	var m loadMeter
	a := m.start()
	if !m.done(a) {
		t.Error("a lone load did not run alone")
	}
	// b starts, c starts beside it, c ends, b ends: neither ran alone.
	b := m.start()
	c := m.start()
	if m.done(c) {
		t.Error("c started while b ran")
	}
	if m.done(b) {
		t.Error("c started while b ran, and b's memory growth holds c's")
	}
	// d ends before e starts: both alone.
	d := m.start()
	if !m.done(d) {
		t.Error("d ran alone")
	}
	e := m.start()
	if !m.done(e) {
		t.Error("e ran alone")
	}
}
