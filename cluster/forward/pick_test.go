package forward

import (
	"testing"
)

// draws returns a random source that answers the given numbers in turn,
// checking each is in range, and fails the test if asked once too often.
func draws(t *testing.T, nums ...int) func(int) int {
	t.Helper()
	return func(k int) int {
		if len(nums) == 0 {
			t.Fatalf("rnd(%d) called once more than expected", k)
		}
		v := nums[0]
		nums = nums[1:]
		if v < 0 || v >= k {
			t.Fatalf("test draws %d, outside [0, %d)", v, k)
		}
		return v
	}
}

func TestPick(t *testing.T) {
	for _, tc := range []struct {
		name  string
		loads []int64
		draws []int
		want  int
	}{
		{"none", nil, nil, -1},
		{"one, no draw", []int64{7}, nil, 0},
		{"two, second less loaded", []int64{3, 1}, []int{0, 0}, 1},
		{"two, first less loaded", []int64{1, 3}, []int{0, 0}, 0},
		{"two drawn in reverse", []int64{1, 3}, []int{1, 0}, 0},
		{"tie goes to the first drawn", []int64{2, 2}, []int{1, 0}, 1},
		{"second draw skips the first", []int64{5, 5, 0}, []int{1, 1}, 2},
		{"second draw below the first", []int64{0, 5, 5}, []int{2, 0}, 0},
		{"never the third, busiest", []int64{4, 9, 1, 1}, []int{0, 0}, 0},
		{"least loaded of the two drawn, not overall", []int64{4, 9, 1, 6}, []int{1, 2}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			got := Pick(len(tc.loads), func(i int) int64 { calls++; return tc.loads[i] }, draws(t, tc.draws...))
			if got != tc.want {
				t.Fatalf("Pick = %d, want %d", got, tc.want)
			}
			if len(tc.loads) < 2 && calls != 0 {
				t.Fatalf("load read %d times with %d candidates", calls, len(tc.loads))
			}
		})
	}
}

// TestPickDistinct checks over every pair of draws that the two
// candidates compared are distinct and both in range, and that the less
// loaded is taken.
func TestPickDistinct(t *testing.T) {
	for n := 2; n <= 5; n++ {
		for a := 0; a < n; a++ {
			for b := 0; b < n-1; b++ {
				var seen []int
				got := Pick(n, func(i int) int64 {
					seen = append(seen, i)
					return int64(10 - i) // higher index, less loaded
				}, draws(t, a, b))
				if len(seen) != 2 || seen[0] == seen[1] {
					t.Fatalf("n=%d draws %d,%d: compared %v, want two distinct candidates", n, a, b, seen)
				}
				if want := max(seen[0], seen[1]); got != want {
					t.Fatalf("n=%d draws %d,%d: got %d, want the less loaded %d", n, a, b, got, want)
				}
			}
		}
	}
}
