package manage

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/groveml/grove/actors"
	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/modelconfig"
	"github.com/groveml/grove/internal/capped"
	"github.com/groveml/grove/transport/httpserver"
	"github.com/groveml/grove/transport/httpserver/httpservertest"
)

const (
	sumOld = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	sumNew = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
)

func TestRollbackAnswersWhatServesNowAndNamesWhatIsWrong(t *testing.T) {
	m := &memManager{cfg: modelconfig.Config{Models: []modelconfig.Model{{Path: "m/", Checksum: sumNew}, {Path: "n/"}}},
		kept: map[string]string{"m/": sumOld}}
	h := serve(m, httpserver.Options{Registerer: prometheus.NewRegistry(), MaxBodyBytes: 1 << 10})
	code, body := call(t, h, "POST", "/v1/rollback", `{"model_path": "m/"}`)
	if code != http.StatusOK {
		t.Fatalf("rollback: %d %s", code, body)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		t.Fatal(err)
	}
	if got["model_path"] != "m/" || got["checksum"] != sumOld || got["rolled_back_from"] != sumNew || got["switch_ms"] != 1.5 {
		t.Fatalf("answer %s", body)
	}
	if m.cfg.Models[0].Checksum != sumOld {
		t.Fatalf("config not written back: %+v", m.cfg.Models[0])
	}
	for _, c := range []struct {
		body string
		code int
		has  string
	}{
		{`{"modelPath": "m/"}`, 200, `"checksum": "` + sumNew + `"`}, // and back again
		{``, 400, "rollback request"},
		{`{"model_path": "m/"`, 400, "rollback request"},
		{`[]`, 400, "rollback request"},
		{`{}`, 400, "model_path is required"},
		{`{"model_path": ""}`, 400, "model_path is required"},
		{`{"model_path": 3}`, 400, "model_path"},
		{`{"model_path": "m/", "force": true}`, 400, `unknown field \"force\"`},
		{`{"model_path": "x/"}`, 404, "model not found"},
		{`{"model_path": "n/"}`, 409, "nothing kept to roll back to for n/: keeping is off"},
		{strings.Repeat(" ", 2<<10), 413, "exceeds the limit"},
	} {
		code, body := call(t, h, "POST", "/v1/rollback", c.body)
		if code != c.code || !strings.Contains(body, c.has) {
			t.Errorf("body %.40q: %d %s, want %d with %q", c.body, code, body, c.code, c.has)
		}
	}
	m.err = actors.ErrReadOnly
	if code, body := call(t, h, "POST", "/v1/rollback", `{"model_path": "m/"}`); code != http.StatusForbidden || !strings.Contains(body, "read-only") {
		t.Errorf("read-only bucket: %d %s", code, body)
	}
	m.err = fmt.Errorf("updating model_config.json in mem: %w", &bucket.ContentTooLargeError{Err: &capped.TooLargeError{What: "the new content of model_config.json", Limit: modelconfig.MaxConfigBytes}})
	if code, body := call(t, h, "POST", "/v1/rollback", `{"model_path": "m/"}`); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "larger than its limit of 64 MiB") {
		t.Errorf("a config edit past its limit: %d %s", code, body)
	}
}

func TestRollbackNeedsTheManageRoleAndMovesToTheAdminListener(t *testing.T) {
	m := &memManager{cfg: modelconfig.Config{Models: []modelconfig.Model{{Path: "m/"}}}, kept: map[string]string{}}
	h := httpserver.New(httpserver.Options{Registerer: prometheus.NewRegistry(), AdminAPIs: []string{"manage", RollbackAPI}})
	Register(h, m, nil)
	if i := slices.IndexFunc(h.Routes(), func(r httpserver.Route) bool { return r.Pattern == "POST /v1/rollback" }); i < 0 || h.Routes()[i].Role != auth.RoleManage {
		t.Fatalf("POST /v1/rollback is not registered with role manage: %v", h.Routes())
	}
	if code, _ := call(t, h.Handler(), "POST", "/v1/rollback", `{"model_path": "m/"}`); code != http.StatusNotFound && code != http.StatusMethodNotAllowed {
		t.Errorf("the scoring listener serves POST /v1/rollback: %d", code)
	}
	if code, body := call(t, h.AdminHandler(), "POST", "/v1/rollback", `{"model_path": "m/"}`); code != http.StatusConflict {
		t.Errorf("the admin listener: %d %s", code, body)
	}
}

// TestRollbackRefusalsAreJSONErrors checks that POST /v1/rollback, a
// Grove JSON route, is refused with {"error": …} like its other answers.
func TestRollbackRefusalsAreJSONErrors(t *testing.T) {
	register := func(h *httpserver.Server) { Register(h, nil, nil) }
	for _, r := range httpservertest.Refusals(t, register, "POST", "/v1/rollback", auth.RoleManage) {
		var doc struct{ Error string }
		if r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(r.Body, &doc) != nil || !strings.HasPrefix(doc.Error, r.Want) {
			t.Errorf("%s: %s %s, want {\"error\": %q…}", r.Why, r.Header.Get("Content-Type"), r.Body, r.Want)
		}
	}
}

// FuzzParseRollback: a rollback body is a model path or an error naming
// what is wrong with the body, never a panic.
func FuzzParseRollback(f *testing.F) {
	for _, s := range []string{`{"model_path": "m/"}`, `{"modelPath": "pcvr/3/"}`, `{}`, `{"model_path": ""}`, `{"model_path": 1}`,
		`{"model_path": "a", "model_path": "b"}`, `{"extra": 1}`, `[]`, `nul`, ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		path, err := parseRollback(body)
		switch {
		case err != nil && !strings.HasPrefix(err.Error(), "rollback request"):
			t.Fatalf("error %q does not say it concerns the rollback request", err)
		case err == nil && path == "":
			t.Fatalf("accepted %q with no model path", body)
		}
	})
}
