package ba

import (
	"sync"
	"testing"
)

func TestParseRequestConcurrentUse(t *testing.T) {
	docs := append([]string{seedRequest}, fuzzSeeds...)
	want := make([]string, len(docs))
	for i, d := range docs {
		want[i] = requestSummary([]byte(d))
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for k := 0; k < 200; k++ {
				i := (g + k) % len(docs)
				if got := requestSummary([]byte(docs[i])); got != want[i] {
					t.Errorf("doc %d: got %s, want %s", i, got, want[i])
					return
				}
			}
		}(g)
	}
	wg.Wait()
}
