package oip

import (
	"context"
	"net/http/httptest"
	"testing"

	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/groveml/grove/api/oip/oippb"
	"github.com/groveml/grove/logging/audit"
	"github.com/groveml/grove/transport/httpserver"
)

// entries is a Recorder that keeps what it is given.
type entries []audit.Entry

func (e *entries) Record(_ context.Context, en audit.Entry) { *e = append(*e, en) }

func TestRefusedRepositoryLoadAndUnloadAreRecorded(t *testing.T) {
	var got entries
	h := httpserver.New(httpserver.Options{})
	Register(h, noGRPC{}, &fake{}, "1.0", &got)
	rec := httptest.NewRecorder()
	h.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/v2/repository/models/pcvr/load", nil))
	if rec.Code != 409 || len(got) != 1 {
		t.Fatalf("REST load: HTTP %d, %d entries", rec.Code, len(got))
	}
	if e := got[0]; e.API != "oip" || e.Route != "POST /v2/repository/models/{name}/load" || e.Target != "pcvr" || e.Status != "409" ||
		e.Result != audit.ResultError || e.Who != audit.Anonymous || e.Error == "" {
		t.Errorf("REST load entry: %+v", e)
	}
	h.Handler().ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v2/repository/models/pcvr/reload", nil))
	if len(got) != 1 {
		t.Errorf("a path that is no endpoint was recorded: %+v", got[1:])
	}

	g := &grpcService{b: &fake{}, rec: &got}
	_, err := g.RepositoryModelUnload(t.Context(), &oippb.RepositoryModelUnloadRequest{ModelName: "pcvr"})
	if grpcstatus.Code(err) != codes.FailedPrecondition || len(got) != 2 {
		t.Fatalf("gRPC unload: %v, %d entries", err, len(got))
	}
	if e := got[1]; e.Target != "pcvr" || e.Status != "FailedPrecondition" || e.Result != audit.ResultError {
		t.Errorf("gRPC unload entry: %+v", e)
	}
}
