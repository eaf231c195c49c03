package manage

import (
	"encoding/json"
	"testing"

	"github.com/groveml/grove/api/forestflow"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/transport/httpserver"
	"github.com/groveml/grove/transport/httpserver/httpservertest"
)

// TestRefusalsAreForestFlowErrors checks that the management API's writes
// and reads are refused with ForestFlow's UnknownServableError body (the
// release their path names, and the message), with their status and
// headers.
func TestRefusalsAreForestFlowErrors(t *testing.T) {
	register := func(h *httpserver.Server) { Register(h, nil, nil) }
	for _, c := range []struct {
		method, path string
		role         auth.Role
		fqrv         forestflow.FQRV
	}{
		{"POST", "/servable", auth.RoleManage, forestflow.FQRV{}},
		{"POST", "/contract/ads/pctr/2", auth.RoleManage, forestflow.FQRV{Contract: forestflow.Contract{Organization: "ads", Project: "pctr", ContractNumber: 2}}},
		{"PUT", "/ads/pctr/2/r9/policy", auth.RoleManage, forestflow.FQRV{Contract: forestflow.Contract{Organization: "ads", Project: "pctr", ContractNumber: 2}, ReleaseVersion: "r9"}},
		{"DELETE", "/ads/pctr/2/r9", auth.RoleManage, forestflow.FQRV{Contract: forestflow.Contract{Organization: "ads", Project: "pctr", ContractNumber: 2}, ReleaseVersion: "r9"}},
		{"GET", "/ads/pctr/2/releases", auth.RoleRead, forestflow.FQRV{Contract: forestflow.Contract{Organization: "ads", Project: "pctr", ContractNumber: 2}}},
	} {
		for _, r := range httpservertest.Refusals(t, register, c.method, c.path, c.role) {
			if r.Header.Get("Content-Type") != "application/json" || !sameError(r.Body, c.fqrv, r.Want) {
				t.Errorf("%s %s, %s: %s %s, want the UnknownServableError of %+v saying %q", c.method, c.path, r.Why, r.Header.Get("Content-Type"), r.Body, c.fqrv, r.Want)
			}
		}
	}
}

// sameError reports whether body is the UnknownServableError of fqrv
// whose message starts with msg.
func sameError(body []byte, fqrv forestflow.FQRV, msg string) bool {
	var doc map[string]map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil || len(doc) != 1 {
		return false
	}
	e := doc[string(forestflow.UnknownServableError)]
	var got string
	if json.Unmarshal(e["errorMessage"], &got) != nil || len(got) < len(msg) || got[:len(msg)] != msg {
		return false
	}
	var fq any
	if json.Unmarshal(e["fqrv"], &fq) != nil {
		return false
	}
	have, _ := json.Marshal(fq) // map keys sorted, as want's
	want, _ := json.Marshal(forestflow.FQRVJSON(fqrv))
	return string(have) == string(want)
}
