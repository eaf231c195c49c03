package actors

import (
	"slices"
	"testing"

	"github.com/groveml/grove/servables"
)

func TestBatchesOfBytesTensorsJoinAndCutByElements(t *testing.T) {
	a, _ := servables.NewStringTensor("s", []int64{1, 2}, []string{"human1", "human"})
	b, _ := servables.NewStringTensor("s", []int64{2, 2}, []string{"monster16", "monster", "", "x"})
	joined, err := concatRows([][]servables.Tensor{{a}, {b}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := joined[0].Strings()
	if err != nil || !slices.Equal(got, []string{"human1", "human", "monster16", "monster", "", "x"}) || !slices.Equal(joined[0].Shape, []int64{3, 2}) {
		t.Fatalf("joined %v %q, %v", joined[0].Shape, got, err)
	}
	parts, err := cutRows(joined, []int{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][]string{{"human1", "human"}, {"monster16", "monster", "", "x"}} {
		s, err := parts[i][0].Strings()
		if err != nil || !slices.Equal(s, want) {
			t.Fatalf("part %d = %q, %v; want %q", i, s, err, want)
		}
	}
}
