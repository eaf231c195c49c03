package servables

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestBytesTensorRoundTripsItsElements(t *testing.T) {
	elems := []string{"human1", "", "naïve", "a\x00b", strings.Repeat("x", 300)}
	tn, err := NewStringTensor("s", []int64{5}, elems)
	if err != nil {
		t.Fatal(err)
	}
	if err := tn.Validate(); err != nil {
		t.Fatal(err)
	}
	if tn.Len() != 5 {
		t.Fatalf("Len = %d, want 5", tn.Len())
	}
	got, err := tn.Strings()
	if err != nil || !slices.Equal(got, elems) {
		t.Fatalf("Strings = %q, %v; want %q", got, err, elems)
	}
	want := []byte{6, 0, 0, 0, 'h', 'u', 'm', 'a', 'n', '1', 0, 0, 0, 0}
	if !slices.Equal(tn.Data[:len(want)], want) {
		t.Fatalf("Data starts % x, want the OIP binary form % x", tn.Data[:len(want)], want)
	}
}

func TestBytesDTypeNameAndZeroTensor(t *testing.T) {
	if Bytes.String() != "BYTES" {
		t.Fatalf("String = %q", Bytes.String())
	}
	if dt, ok := ParseDType("BYTES"); !ok || dt != Bytes {
		t.Fatalf("ParseDType(BYTES) = %v, %v", dt, ok)
	}
	z, err := NewTensor("z", Bytes, []int64{2, 3})
	if err != nil {
		t.Fatal(err)
	}
	s, err := z.Strings()
	if err != nil || !slices.Equal(s, make([]string, 6)) {
		t.Fatalf("zero BYTES tensor = %q, %v; want 6 empty strings", s, err)
	}
}

func TestCheckBytesNamesWhatIsWrong(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		n    int
		want string // "" for valid
	}{
		{"two elements", []byte{1, 0, 0, 0, 'a', 0, 0, 0, 0}, 2, ""},
		{"too few elements", []byte{1, 0, 0, 0, 'a'}, 2, "holds 1 element(s), the shape needs 2"},
		{"partial length", []byte{1, 0, 0, 0, 'a', 0, 0}, 2, "too few for its 4-byte length"},
		{"length past the end", []byte{9, 0, 0, 0, 'a'}, 1, "has length 9, but only 1 bytes follow it"},
		{"huge length", []byte{0xff, 0xff, 0xff, 0xff}, 1, "has length 4294967295"},
		{"bytes left over", []byte{0, 0, 0, 0, 7}, 1, "1 bytes after its 1 elements"},
		{"empty", nil, 1, "holds 0 element(s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckBytes(tc.data, tc.n)
			shape := []int64{int64(tc.n)}
			if verr := (Tensor{DType: Bytes, Shape: shape, Data: tc.data}).Validate(); (verr == nil) != (err == nil) || (verr != nil && !errors.Is(verr, ErrShape)) {
				t.Fatalf("Validate = %v, CheckBytes = %v", verr, err)
			}
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("CheckBytes = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestRowOffsetsOfBytesFollowTheElements(t *testing.T) {
	tn, err := NewStringTensor("s", []int64{3, 2}, []string{"a", "bb", "", "ccc", "d", ""})
	if err != nil {
		t.Fatal(err)
	}
	offs, err := tn.RowOffsets(3)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 11, 22, 31}; !slices.Equal(offs, want) {
		t.Fatalf("offsets %v, want %v", offs, want)
	}
	if _, err := tn.RowOffsets(4); err == nil {
		t.Fatal("6 elements cut into 4 rows: no error")
	}
	num, _ := NewTensor("f", Float32, []int64{3, 2})
	if offs, err := num.RowOffsets(3); err != nil || !slices.Equal(offs, []int{0, 8, 16, 24}) {
		t.Fatalf("FLOAT offsets %v, %v", offs, err)
	}
}
