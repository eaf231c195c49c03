package modelconfig

import "testing"

func TestLookupConfigFindsANameWrittenInAnotherCase(t *testing.T) {
	for _, c := range []struct {
		configs map[string]string
		name    string
		want    string
		ok      bool
	}{
		{map[string]string{"userId": "u1"}, "userId", "u1", true},
		// Grove-Config-UserId and GraphPipe arrive lowercased.
		{map[string]string{"userid": "u1"}, "userId", "u1", true},
		{map[string]string{"USERID": "u1"}, "userId", "u1", true},
		// The exact name wins over another case.
		{map[string]string{"userid": "low", "userId": "exact"}, "userId", "exact", true},
		// Two other cases: the least name, whatever the map's order.
		{map[string]string{"userid": "low", "USERID": "up", "UserId": "mixed"}, "userId", "up", true},
		{map[string]string{"user": "u1"}, "userId", "", false},
		{nil, "userId", "", false},
	} {
		for range 20 { // map order varies from one range to the next
			if got, ok := LookupConfig(c.configs, c.name); got != c.want || ok != c.ok {
				t.Fatalf("LookupConfig(%v, %q) = %q, %v; want %q, %v", c.configs, c.name, got, ok, c.want, c.ok)
			}
		}
	}
}
