package actors

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/groveml/grove/conf/bucket/file"
	"github.com/groveml/grove/conf/modelconfig"
)

// A poll's read of the shared state that started before this replica wrote
// a newer state (a metric fed a moment ago) must not replace it; a read
// that started after every write is published.
func TestSharedStateReadStartedBeforeALocalWriteIsNotPublished(t *testing.T) {
	ctx := context.Background()
	b, err := file.Open("file://" + t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	s := newSharedState(b, "model_config.json", slog.New(slog.NewTextHandler(io.Discard, nil)))

	mark := s.readMark()
	stale, err := s.read(ctx) // the poll's read: no metrics yet
	if err != nil {
		t.Fatal(err)
	}
	if err := s.update(ctx, b, func(st *modelconfig.ContractState) error {
		st.Edit("ads/pctr/1", "v2", func(r *modelconfig.ServableRecord) { r.Metrics = map[string]float64{"auc": 0.74} })
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	auc := func() float64 { return s.load().Record("ads/pctr/1", "v2").Metrics["auc"] }
	if s.publishRead(stale, mark) || auc() != 0.74 {
		t.Fatalf("the stale read replaced the newer state: auc = %v", auc())
	}

	mark = s.readMark()
	fresh, err := s.read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !s.publishRead(fresh, mark) || auc() != 0.74 {
		t.Fatalf("a read after the write was not published: auc = %v", auc())
	}
}
