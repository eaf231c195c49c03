package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/groveml/grove/conf/bucket"
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

// The bandit routers' saved counts are what the contract state gives up
// first when a write would pass its size limit: the stamps and gate
// decisions written with them are written without them (the counts a
// batch would have saved, then, if still too large, every router's
// counts already saved), rather than the whole batch failing while the
// fleet's state sits at its limit.
func TestSharedStateGivesUpBanditCountsBeforeStampsAtItsSizeLimit(t *testing.T) {
	const limit = 2048
	big := func(n int) json.RawMessage {
		n = max(n, 0)
		return json.RawMessage(`{"at":"2026-11-30T12:00:00Z","reward":"click","pad":"` + strings.Repeat("x", n) + `"}`)
	}
	created := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name        string
		held        json.RawMessage // counts saved before, for ads/other/1
		save        json.RawMessage // counts a router asks to save, for ads/pctr/1
		wantBandits []string
	}{
		{"the counts to save do not fit", nil, big(3000), nil},
		{"the counts saved leave no room", big(-1), nil, nil}, // -1: the state 10 bytes short of its limit
		{"both fit", big(100), big(100), []string{"ads/other/1", "ads/pctr/1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newMemBucket()
				st := &modelconfig.ContractState{}
				for i := range 10 {
					st.Edit("ads/pctr/1", fmt.Sprintf("v%d", i), func(r *modelconfig.ServableRecord) { r.Created = created })
				}
				st.SetBandit("ads/other/1", tc.held)
				data, err := st.MarshalJSON()
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(tc.held), `"pad":""`) {
					st.SetBandit("ads/other/1", big(limit-10-len(data)))
					if data, err = st.MarshalJSON(); err != nil || len(data) != limit-10 {
						t.Fatalf("state of %d bytes, %v", len(data), err)
					}
				}
				b.set("model_config.state.json", data)
				s := newSharedState(b, "model_config.json", slog.New(slog.NewTextHandler(io.Discard, nil)))
				s.limit = limit
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				go s.run(ctx)
				if tc.save != nil {
					var p atomic.Pointer[json.RawMessage]
					p.Store(&tc.save)
					s.saveBandit("ads/pctr/1", &p)
				}
				s.setCreated("ads/pctr/1", "v10", created)
				synctest.Wait()
				got, err := modelconfig.ParseContractState(b.get("model_config.state.json"))
				if err != nil {
					t.Fatal(err)
				}
				if got.Record("ads/pctr/1", "v10").Created.IsZero() {
					t.Fatalf("v10's creation stamp not written (state of %d bytes)", len(b.get("model_config.state.json")))
				}
				if ids := slices.Sorted(maps.Keys(got.Bandits)); !slices.Equal(ids, tc.wantBandits) {
					t.Errorf("saved counts of %v, want %v", ids, tc.wantBandits)
				}
			})
		})
	}
}

// A change that would make the contract state larger than its limit (a
// metric fed through the management API, say) is refused as an edit of
// the model config past its own is: a *bucket.ContentTooLargeError naming
// the limit, which the management API answers 413, not a server fault.
func TestAChangeThatWouldGrowTheContractStatePastItsLimitIsContentTooLarge(t *testing.T) {
	b := newMemBucket()
	s := newSharedState(b, "model_config.json", slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.limit = 1024
	err := s.update(t.Context(), b, func(st *modelconfig.ContractState) error {
		st.Edit("ads/pctr/1", "v1", func(r *modelconfig.ServableRecord) {
			r.Metrics = map[string]float64{strings.Repeat("m", 2048): 1}
		})
		return nil
	})
	var tooLarge *bucket.ContentTooLargeError
	if !errors.As(err, &tooLarge) || !strings.Contains(err.Error(), "the new contract state model_config.state.json is larger than its limit of 1 KiB") {
		t.Fatalf("a change past the limit: %v, want a *bucket.ContentTooLargeError naming the limit", err)
	}
	if data := b.get("model_config.state.json"); data != nil {
		t.Errorf("the state was written: %s", data)
	}
}
