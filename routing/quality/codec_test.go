package quality

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// codecSeeds are states of each kind, encoded: the fuzz corpus starts
// from them (and from testdata/fuzz/FuzzDecode, which holds them).
func codecSeeds() [][]byte {
	r := rand.New(rand.NewPCG(21, 22))
	var b Binary
	var n Numeric
	var p Paired
	t0 := time.Unix(1_800_000_000, 5)
	wb, wn, wp := NewOutcomeWindows[Binary](t0), NewOutcomeWindows[Numeric](t0), NewOutcomeWindows[Paired](t0)
	for i := range 50 {
		x := r.Float64() * 0.1
		pos := r.Float64() < x
		b.Add(x, pos)
		n.Add(x*10, float64(i))
		p.Add(x, x*1.2, pos)
		at := t0.Add(time.Duration(i) * 97 * time.Second)
		if s, m := wb.At(at); m != nil {
			s.Add(x, pos)
			m.Add(x, pos)
		}
		if s, m := wn.At(at); m != nil {
			s.Add(x, 1)
			m.Add(x, 1)
		}
		if s, m := wp.At(at); m != nil {
			s.Add(x, x/2, pos)
			m.Add(x, x/2, pos)
		}
	}
	b.Add(-1, false)
	// A busy series' pCTRs, clustered: a dense score histogram.
	var dense Binary
	rd := rand.New(rand.NewPCG(23, 24))
	for range 3000 {
		x := 0.02 + 0.006*rd.Float64()
		dense.Add(x, rd.Float64() < x)
	}
	if dense.scores.pages == nil || dense.scores.bins() < aucDenseMin {
		panic(fmt.Sprintf("the dense seed's histogram is not dense (%d bins)", dense.scores.bins()))
	}
	var out [][]byte
	for _, m := range []interface{ MarshalBinary() ([]byte, error) }{&b, &n, &p, wb, wn, wp, new(Binary), new(Paired), &dense} {
		data, err := m.MarshalBinary()
		if err != nil {
			panic(err)
		}
		out = append(out, data)
	}
	return out
}

// decoders are fresh values of every kind of state.
func decoders() []interface {
	UnmarshalBinary([]byte) error
	MarshalBinary() ([]byte, error)
} {
	return []interface {
		UnmarshalBinary([]byte) error
		MarshalBinary() ([]byte, error)
	}{new(Binary), new(Numeric), new(Paired), new(OutcomeWindows[Binary, *Binary]),
		new(OutcomeWindows[Numeric, *Numeric]), new(OutcomeWindows[Paired, *Paired])}
}

func TestStatesComeBackEqualFromTheirBinaryForm(t *testing.T) {
	seeds := codecSeeds()
	for i, want := range seeds {
		decoded := 0
		for _, d := range decoders() {
			if err := d.UnmarshalBinary(want); err != nil {
				if !errors.Is(err, errCorrupt) {
					t.Fatalf("seed %d into %T: error %v does not wrap errCorrupt", i, d, err)
				}
				continue
			}
			decoded++
			got, _ := d.MarshalBinary()
			if !bytes.Equal(got, want) {
				t.Fatalf("seed %d: %T encodes back differently", i, d)
			}
		}
		if decoded != 1 {
			t.Fatalf("seed %d decodes as %d kinds, want 1", i, decoded)
		}
	}
	// The figures come back too.
	var b Binary
	for i := range 1000 {
		b.Add(float64(i%97)/97, i%7 == 0)
	}
	data, _ := b.MarshalBinary()
	var c Binary
	if err := c.UnmarshalBinary(data); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b.Figures(), c.Figures()) || b.AUCErrorBound() != c.AUCErrorBound() {
		t.Fatalf("figures %+v, want %+v", c.Figures(), b.Figures())
	}
}

func TestDecodingRefusesCorruptStates(t *testing.T) {
	var b Binary
	b.Add(0.3, true)
	b.Add(0.6, false)
	good, _ := b.MarshalBinary()
	for name, data := range map[string][]byte{
		"empty":          nil,
		"other version":  append([]byte{codecVersion + 1}, good[1:]...),
		"other kind":     append([]byte{codecVersion, kindNumeric}, good[2:]...),
		"truncated":      good[:len(good)-1],
		"trailing bytes": append(bytes.Clone(good), 0),
		"count too high": append([]byte{codecVersion, kindBinary, 3}, good[3:]...),
		"huge bin count": append(bytes.Clone(good[:len(good)-7]), 0xff, 0xff, 0xff, 0xff, 0x0f),
	} {
		before := b
		if err := b.UnmarshalBinary(data); !errors.Is(err, errCorrupt) {
			t.Errorf("%s: error %v, want a corrupt state", name, err)
		}
		if !reflect.DeepEqual(b, before) {
			t.Errorf("%s: the failed decode changed the state", name)
		}
	}
}

// TestFuzzCorpusHoldsTheSeeds: testdata/fuzz/FuzzDecode holds codecSeeds,
// so that the checked-in corpus follows the binary form.
func TestFuzzCorpusHoldsTheSeeds(t *testing.T) {
	for i, s := range codecSeeds() {
		path := filepath.Join("testdata", "fuzz", "FuzzDecode", fmt.Sprintf("seed-%02d", i))
		want := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", s)
		if os.Getenv("QUALITY_WRITE_CORPUS") != "" {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s is not seed %d (QUALITY_WRITE_CORPUS=1 rewrites it): %v", path, i, err)
		}
	}
}

// FuzzDecode: any bytes decode into each kind of state either with an
// error wrapping errCorrupt or into a state that encodes and decodes back
// to the same bytes and describes itself without panicking.
func FuzzDecode(f *testing.F) {
	for _, s := range codecSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, d := range decoders() {
			if err := d.UnmarshalBinary(data); err != nil {
				if !errors.Is(err, errCorrupt) {
					t.Fatalf("%T: error %v does not wrap errCorrupt", d, err)
				}
				continue
			}
			again, err := d.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			e := decoders()
			for _, d2 := range e {
				if reflect.TypeOf(d2) != reflect.TypeOf(d) {
					continue
				}
				if err := d2.UnmarshalBinary(again); err != nil {
					t.Fatalf("%T: its own encoding does not decode: %v", d, err)
				}
				third, _ := d2.MarshalBinary()
				if !bytes.Equal(third, again) {
					t.Fatalf("%T: encoding is not stable", d)
				}
			}
			switch v := d.(type) {
			case *Binary:
				_ = v.Figures()
				_ = v.AUCErrorBound()
			case *Numeric:
				_ = v.Figures()
			case *Paired:
				_ = v.Delta(0).VsChampion()
			case *OutcomeWindows[Binary, *Binary]:
				_ = v.OutcomeStats(time.Unix(1_800_000_000, 0))
			}
		}
	})
}
