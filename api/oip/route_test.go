package oip

import (
	"bytes"
	"compress/gzip"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/transport/httpserver"
)

// served is a fake Backend serving the model paths it holds; each model's
// only output is named after its path, so an answer tells which model gave
// it.
type served struct {
	fake
	paths []string
}

func (s *served) ModelPaths() []string { return s.paths }

func (*served) NewestVersion(string) (string, bool) { return "", false }

func (s *served) ModelMetadata(path string) (servables.Metadata, string, bool) {
	return servables.Metadata{Runtime: "onnx", Outputs: []servables.TensorSpec{{Name: path, DType: servables.Float32}}}, "", true
}

func TestModelNamesEndingInPathWordsAreRoutedToTheirModel(t *testing.T) {
	b := &served{paths: []string{"a/ready/", "x/versions/2/1/", "config/", "m/infer/", "m/infer/3/", "pcvr/2/", "both/", "both/stats/", "t/trace/setting/"}}
	h := httpserver.New(httpserver.Options{})
	Register(h, noGRPC{}, b, "1.0", nil)
	for _, c := range []struct {
		method, path string
		code         int
		has          string
	}{
		// A model named after an endpoint word gets its metadata.
		{"GET", "/v2/models/a/ready", 200, `"name":"a/ready/"`},
		{"GET", "/v2/models/a/ready/ready", 200, `{"name":"a/ready","ready":true}`},
		{"GET", "/v2/models/a/ready/versions/1", 200, `"name":"a/ready/"`},
		{"GET", "/v2/models/a/ready/versions/1/ready", 200, `{"name":"a/ready","ready":true}`},
		{"GET", "/v2/models/a/ready/stats", 200, `"name":"a/ready","response_stats":{},"version":"1"`},
		{"POST", "/v2/models/a/ready/infer", 200, `"model_name":"a/ready"`},
		{"GET", "/v2/models/x/versions/2", 200, `"name":"x/versions/2/1/"`},
		{"GET", "/v2/models/x/versions/2/versions/1", 200, `"name":"x/versions/2/1/"`},
		{"GET", "/v2/models/x/versions/2/ready", 200, `{"name":"x/versions/2","ready":true}`},
		{"POST", "/v2/models/x/versions/2/versions/1/infer", 200, `"model_name":"x/versions/2","model_version":"1"`},
		{"GET", "/v2/models/config", 200, `"name":"config/"`},
		{"GET", "/v2/models/config/ready", 200, `{"name":"config","ready":true}`},
		{"GET", "/v2/models/m/infer", 200, `"name":"m/infer/3/"`},
		{"GET", "/v2/models/m/infer/versions/1", 200, `"name":"m/infer/"`},
		{"POST", "/v2/models/m/infer/infer", 200, `"model_name":"m/infer","model_version":"3"`},
		{"POST", "/v2/models/m/infer/versions/1/infer", 200, `"model_name":"m/infer","model_version":"1"`},
		// POST .../infer of a model that is not served names the model
		// the OIP reading gives, GET .../infer a model named so.
		{"POST", "/v2/models/m/infer", 404, `unknown model: 'm'`},
		{"GET", "/v2/models/nope/infer", 404, `unknown model: 'nope/infer'`},
		// The endpoints of a served model win over a model named like one.
		{"GET", "/v2/models/both/stats", 200, `"name":"both","response_stats":{},"version":"1"`},
		{"GET", "/v2/models/both/stats/versions/1", 200, `"name":"both/stats/"`},
		{"GET", "/v2/models/pcvr/versions/2", 200, `"name":"pcvr/2/"`},
		// Triton's per-model trace settings are refused, unless a model
		// has that name.
		{"GET", "/v2/models/pcvr/trace/setting", 501, `is not supported: Grove has no trace extension`},
		{"GET", "/v2/models/t/trace/setting", 200, `"name":"t/trace/setting/"`},
		{"GET", "/v2/models/pcvr/versions/3", 404, `unknown model: 'pcvr' version 3`},
		{"GET", "/v2/models/pcvr/versions/3/ready", 503, `{"name":"pcvr","ready":false}`},
		// config is an endpoint word: it is not read as part of a name.
		{"GET", "/v2/models/pcvr/config", 200, `"name":"pcvr"`},
		{"POST", "/v2/models/pcvr", 404, `no such endpoint: POST /v2/models/pcvr`},
	} {
		rec := httptest.NewRecorder()
		h.Handler().ServeHTTP(rec, httptest.NewRequest(c.method, c.path, strings.NewReader(inferBody)))
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.has) {
			t.Errorf("%s %s: %d %s, want %d with %s", c.method, c.path, rec.Code, rec.Body, c.code, c.has)
		}
	}
}

func TestModelRoutesListEveryReadingOIPsFirst(t *testing.T) {
	for rest, want := range map[string][]modelRoute{
		"m":                   {{"m", "", ""}},
		"m/infer":             {{"m", "", "infer"}, {"m/infer", "", ""}},
		"m/versions/2":        {{"m", "2", ""}, {"m/versions/2", "", ""}},
		"m/versions/2/config": {{"m", "2", "config"}, {"m/versions/2", "", "config"}, {"m/versions/2/config", "", ""}},
		"m/versions/2/ready/versions/3/stats": {{"m/versions/2/ready", "3", "stats"}, {"m/versions/2/ready/versions/3", "", "stats"},
			{"m/versions/2/ready/versions/3/stats", "", ""}},
		"versions/2":  {{"versions/2", "", ""}},
		"/versions/2": {{"", "2", ""}, {"/versions/2", "", ""}},
		"m/versions/": {{"m/versions/", "", ""}},
	} {
		got := modelRoutes(rest, nil)
		if len(got) != len(want) {
			t.Errorf("%q: %v, want %v", rest, got, want)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%q: %v, want %v", rest, got, want)
				break
			}
		}
	}
}

// FuzzModelRoutes reads arbitrary /v2/models/ paths: every reading puts
// back together to the path, there is at least one, an action is always
// an endpoint word, and a version never holds "/". The seed corpus
// is in testdata/fuzz/FuzzModelRoutes.
func FuzzModelRoutes(f *testing.F) {
	f.Fuzz(func(t *testing.T, rest string) {
		rs := modelRoutes(rest, nil)
		if len(rs) == 0 {
			t.Fatalf("%q: no reading", rest)
		}
		for _, r := range rs {
			back := r.name
			if r.version != "" {
				back += "/versions/" + r.version
			}
			if r.action != "" {
				back += "/" + r.action
			}
			if back != rest || strings.Contains(r.version, "/") || (r.action != "" && !strings.Contains("ready infer stats config", r.action)) {
				t.Fatalf("%q: reading %+v", rest, r)
			}
		}
	})
}

func TestRepositoryLoadAndUnloadAreRefusedNamingTheConfigAndTheManagementAPI(t *testing.T) {
	h := httpserver.New(httpserver.Options{})
	Register(h, noGRPC{}, &fake{}, "1.0", nil)
	for path, want := range map[string]struct {
		code int
		has  string
	}{
		"/v2/repository/models/m/load":          {409, `model repository load of model 'm' is refused: the model config in the bucket`},
		"/v2/repository/models/ads/pcvr/unload": {409, `model repository unload of model 'ads/pcvr' is refused`},
		"/v2/repository/models/m/reload":        {404, `no such endpoint: POST /v2/repository/models/m/reload`},
		"/v2/repository/models/load":            {404, `no such endpoint`},
	} {
		rec := httptest.NewRecorder()
		h.Handler().ServeHTTP(rec, httptest.NewRequest("POST", path, strings.NewReader(`{}`)))
		if rec.Code != want.code || !strings.HasPrefix(rec.Body.String(), `{"error":`) || !strings.Contains(rec.Body.String(), want.has) {
			t.Errorf("POST %s: %d %s, want %d with %s", path, rec.Code, rec.Body, want.code, want.has)
		}
		if want.code == 409 && !strings.Contains(rec.Body.String(), "POST /servable") {
			t.Errorf("POST %s does not name the management API: %s", path, rec.Body)
		}
	}
}

func TestCompressedInferBodiesAreDecodedAndUnknownCodingsNamed(t *testing.T) {
	h := httpserver.New(httpserver.Options{})
	Register(h, noGRPC{}, &fake{outputs: []servables.Tensor{{Name: "y", DType: servables.Float32, Shape: []int64{1}, Data: make([]byte, 4)}}}, "1.0", nil)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write([]byte(inferBody))
	_ = zw.Close()
	for enc, body := range map[string][]byte{"gzip": gz.Bytes(), "zstd": []byte(inferBody)} {
		rec := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/v2/models/m/infer", bytes.NewReader(body))
		r.Header.Set("Content-Encoding", enc)
		h.Handler().ServeHTTP(rec, r)
		switch enc {
		case "gzip":
			if rec.Code != 200 || !strings.Contains(rec.Body.String(), `"name":"y"`) {
				t.Errorf("gzip: %d %s", rec.Code, rec.Body)
			}
		default:
			if rec.Code != 415 || rec.Header().Get("Accept-Encoding") != "gzip, deflate" || !strings.Contains(rec.Body.String(), `\"zstd\"`) {
				t.Errorf("zstd: %d %v %s", rec.Code, rec.Header(), rec.Body)
			}
		}
	}
}
