package sidecar

import (
	"context"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/api/sidecar/sidecarpb"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/logging/audit"
)

// entries is a Recorder that keeps what it is given.
type entries []audit.Entry

func (e *entries) Record(_ context.Context, en audit.Entry) { *e = append(*e, en) }

func TestRegisterAndDeleteAreRecordedWithTheirCallerAndCode(t *testing.T) {
	var got entries
	spec := &sidecarpb.ModelSpec{ModelPath: "r/"}
	ctx := auth.NewContext(t.Context(), auth.Identity{Name: "bidder-eu", Method: "certificate"})
	ok := &service{b: fake{}, rec: &got}
	if _, err := ok.RegisterModel(ctx, &sidecarpb.RegisterModelRequest{ModelSpec: spec}); err != nil {
		t.Fatal(err)
	}
	refused := &service{b: fake{regErr: fmt.Errorf("model r/: %w", actors.ErrManagedByConfig)}, rec: &got}
	_, err := refused.DeleteModel(t.Context(), &sidecarpb.DeleteModelRequest{ModelSpec: spec})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("refused delete: %v", err)
	}
	if len(got) != 2 {
		t.Fatalf("%d entries, want 2", len(got))
	}
	if e := got[0]; e.Who != "bidder-eu" || e.Auth != "certificate" || e.API != "sidecar" || e.Target != "r/" || e.Status != "OK" || e.Result != audit.ResultOK {
		t.Errorf("register entry: %+v", e)
	}
	if e := got[1]; e.Who != audit.Anonymous || e.Status != "FailedPrecondition" || e.Result != audit.ResultError || e.Error != "model r/: the model path is managed by the model config" {
		t.Errorf("delete entry: %+v", e)
	}
}
