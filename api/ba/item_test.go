package ba

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/transport/httpserver"
)

// loggedItems posts a batch of items to the B&A API over a recording
// backend and returns the item of each prediction event logged for the
// requests the backend ran, in order.
func loggedItems(t *testing.T, items ...string) []int64 {
	t.Helper()
	var seen []actors.Request
	code, body := post(t, serveBA(recorder{&seen}, httpserver.Options{}), `{"request":[`+strings.Join(items, ",")+`]}`)
	if code != http.StatusOK {
		t.Fatalf("HTTP %d: %s", code, body)
	}
	var got []int64
	for i := range seen {
		got = append(got, actors.PredictionEvent(&seen[i], &actors.Result{ModelPath: seen[i].ModelPath, Outputs: seen[i].Inputs}, true).GetItem())
	}
	return got
}

func TestBatchItemsAreLoggedWithTheirPositionInTheBatch(t *testing.T) {
	if got := loggedItems(t, intItem("a/"), intItem("b/"), intItem("a/")); !slices.Equal(got, []int64{0, 1, 2}) {
		t.Errorf("events' items %v, want [0 1 2]", got)
	}
}

func TestAnItemThatDidNotParseKeepsItsPositionCounted(t *testing.T) {
	// The middle item never runs: the events of the others still name
	// their place in the caller's batch, which is what an outcome's item
	// counts.
	if got := loggedItems(t, intItem("a/"), `{"tensors":[]}`, intItem("b/")); !slices.Equal(got, []int64{0, 2}) {
		t.Errorf("events' items %v, want [0 2]", got)
	}
}
