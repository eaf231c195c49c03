package join

import (
	"fmt"
	"strings"
	"testing"
)

// appendOld is g's binary form as version 1 or 2 wrote it: one window,
// the group's, for every prediction; version 1 also held each
// prediction's record key rk, and had no keyed group.
func appendOld(g *group, version byte, rk string) []byte {
	e := enc{version}.i(g.start).i(g.end).i(g.closedStart).i(g.closedEnd).u(uint64(len(g.preds)))
	for i := range g.preds {
		p := &g.preds[i]
		e = e.y(p.eventID).s(p.contract).s(p.release).s(p.modelPath)
		if version == 1 {
			e = e.s(rk)
		}
		e = e.b(p.served).i(p.ts).f(p.value)
	}
	e = e.u(uint64(len(g.outs)))
	for i := range g.outs {
		e = e.out(&g.outs[i])
	}
	e = e.u(uint64(len(g.closedEvents)))
	for _, id := range g.closedEvents {
		e = e.y(id)
	}
	if version == 1 {
		return e
	}
	if e = e.b(g.keyed); g.keyed {
		e = e.i(g.keyedStart - g.start).i(g.keyedEnd - g.end)
	}
	return e
}

// oldGroup is a group as versions 1 and 2 held one: every prediction
// with the group's window.
func oldGroup() *group {
	return &group{start: 1_000, end: 31_000, closedStart: 10, closedEnd: 20, closedEvents: [][]byte{[]byte("e0")},
		preds: []pred{
			{eventID: []byte("e1"), contract: "ads/bench/1", release: "v1", modelPath: "pctr_v1/", served: true, ts: 1_000, value: 0.25, start: 1_000, end: 31_000},
			{eventID: []byte("e2"), contract: "ads/bench/1", release: "v2", modelPath: "pctr_v2/", ts: 1_001, value: 0.5, start: 1_000, end: 31_000},
		},
		outs: []out{{id: []byte("o1"), t: 2_000, labels: []label{{name: "click", value: 1}}}}}
}

// readOld reads g as version wrote it (appendOld) and checks that it
// reads back as g; it returns what it read it into.
func readOld(t *testing.T, g *group, version byte, rk string) (back *group, nm *names) {
	t.Helper()
	want := string(g.appendTo(nil))
	back, nm = new(group), new(names)
	if err := back.unmarshal(appendOld(g, version, rk), nm); err != nil {
		t.Fatalf("a group of version %d: %v", version, err)
	}
	if got := string(back.appendTo(nil)); got != want {
		t.Fatalf("version %d read back as %q, want %q", version, got, want)
	}
	return back, nm
}

func TestGroupsStoredByVersion1AreReadAsTheyWereWritten(t *testing.T) {
	g := oldGroup()
	want := string(g.appendTo(nil))
	back, names := readOld(t, g, 1, "request-key")
	if err := back.unmarshal([]byte(want), names); err != nil || string(back.appendTo(nil)) != want {
		t.Fatalf("version %d read back: %v", storeVersion, err)
	}
}

func TestAStoredValueOfANewerVersionIsAnErrorNamingItsVersion(t *testing.T) {
	g := &group{start: 1_000, end: 31_000, preds: []pred{{eventID: []byte("e1"), contract: "c", release: "v1", served: true, ts: 1_000}}}
	b := g.appendTo(nil)
	b[0] = storeVersion + 1
	var names names
	var back group
	err := back.unmarshal(b, &names)
	want := fmt.Sprintf("version %d: the store was written by a newer Grove", storeVersion+1)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("a group of version %d: error %v, want one saying %q", storeVersion+1, err, want)
	}
	var k keyIndex
	if err := k.unmarshal([]byte{storeVersion + 1, 0, 0}, &names); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("an index entry of version %d: error %v, want one saying %q", storeVersion+1, err, want)
	}
	if err := back.unmarshal(nil, &names); err == nil {
		t.Fatal("an empty value read without an error")
	}
}

// TestValuesStoredByVersion2AreRead: a store written before each
// prediction kept its own window (version 2) is read after an upgrade,
// its groups' predictions with the group's window, and its index entries
// as they were.
func TestValuesStoredByVersion2AreRead(t *testing.T) {
	g := oldGroup()
	g.keyed, g.keyedStart, g.keyedEnd = true, 900, 31_000
	_, names := readOld(t, g, 2, "")
	x := &keyIndex{refs: []keyRef{{joinKey: []byte("gk\x00\x00\x00"), start: 1_000, end: 31_000}}}
	v2 := x.appendTo(nil)
	v2[0] = 2
	var xb keyIndex
	if err := xb.unmarshal(v2, names); err != nil {
		t.Fatalf("an index entry of version 2: %v", err)
	}
	if got, want := string(xb.appendTo(nil)), string(x.appendTo(nil)); got != want {
		t.Fatalf("index entry of version 2 read back as %q, want %q", got, want)
	}
}
