package it

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/groveml/grove/internal/rawhttptest"
)

// TestH1EngineAnswersAsNetHTTPDoes serves one bucket from two groves, one
// with the default engine, which is h1 on a plaintext listener, the other
// with --http-engine net/http, and sends both the same requests of every
// kind (B&A and OIP inference, compressed, malformed, too large, for an
// unknown model, metadata, probes, an unknown path): each answer, status
// and body, is the same. On a raw connection, h1 keeps the connection
// across requests, pipelined ones included.
//
// Budget: 6 s.
func TestH1EngineAnswersAsNetHTTPDoes(t *testing.T) {
	t.Parallel()
	bucket := cornersBucket(t, map[string]string{"mixed/": "mixed"}).URL()
	netGrove := startGrove(t, bucket, nil, "--max-body-bytes", "65536", "--http-engine", "net/http")
	h1Grove := startGrove(t, bucket, nil, "--max-body-bytes", "65536")
	for g, want := range map[*grove]string{netGrove: "net/http", h1Grove: "h1"} {
		if addrs, _ := servingAddrs(g.logs.String()); addrs["http_engine"] != want {
			t.Fatalf("grove serving line names http_engine=%q, want %q", addrs["http_engine"], want)
		}
	}
	oip := []byte(`{"inputs":[{"name":"ids","datatype":"INT64","shape":[1,2],"data":[1,2]},{"name":"w","datatype":"FP32","shape":[1,1],"data":[0.5]}],"outputs":[{"name":"total"}]}`)
	ba := []byte(`{"request":[{"model_path":"mixed/","tensors":[{"tensor_name":"ids","data_type":"INT64","tensor_shape":[1,2],"tensor_content":["1","2"]},` +
		`{"tensor_name":"w","data_type":"FLOAT","tensor_shape":[1,1],"tensor_content":["0.5"]}]}]}`)
	for _, tc := range []struct {
		name, method, path string
		body               []byte
		headers            []string
	}{
		{"OIP infer", "POST", "/v2/models/mixed/infer", oip, nil},
		{"OIP infer, gzip", "POST", "/v2/models/mixed/infer", compress(t, "gzip", oip), []string{"Content-Encoding", "gzip"}},
		{"OIP infer, unknown model", "POST", "/v2/models/nope/infer", oip, nil},
		{"OIP infer, malformed", "POST", "/v2/models/mixed/infer", []byte(`{"inputs":`), nil},
		{"OIP metadata", "GET", "/v2/models/mixed", nil, nil},
		{"B&A inference", "POST", "/v1/inference", ba, nil},
		{"B&A inference, malformed", "POST", "/v1/inference", []byte(`{"request":[`), nil},
		{"B&A inference, too large", "POST", "/v1/inference", []byte(strings.Repeat(" ", 70000)), nil},
		{"B&A inference, unknown encoding", "POST", "/v1/inference", ba, []string{"Content-Encoding", "br"}},
		{"B&A model paths", "GET", "/v1/models", nil, nil},
		{"readiness", "GET", "/readyz", nil, nil},
		{"OIP server ready", "GET", "/v2/health/ready", nil, nil},
		{"unknown path", "GET", "/nowhere", nil, nil},
		{"wrong method", "DELETE", "/v1/inference", nil, nil},
	} {
		wantCode, wantBody := netGrove.send(t, tc.method, tc.path, tc.body, tc.headers...)
		code, body := h1Grove.send(t, tc.method, tc.path, tc.body, tc.headers...)
		if code != wantCode || body != wantBody {
			t.Errorf("%s: h1 answered %d %q, net/http %d %q", tc.name, code, body, wantCode, wantBody)
		}
	}

	c := rawhttptest.DialRaw(t, strings.TrimPrefix(h1Grove.url, "http://"))
	infer := "POST /v2/models/mixed/infer HTTP/1.1\r\nHost: grove\r\nContent-Length: " + strconv.Itoa(len(oip)) + "\r\n\r\n" + string(oip)
	c.Send(infer)
	if resp, body, err := c.Answer(5 * time.Second); err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(body, `"data":[1.5]`) {
		t.Fatalf("h1, first request on a connection: %v %v %q", resp, err, body)
	}
	c.Send(infer + "GET /readyz HTTP/1.1\r\nHost: grove\r\n\r\n" + infer)
	for i, want := range []string{`"data":[1.5]`, "", `"data":[1.5]`} {
		resp, body, err := c.Answer(5 * time.Second)
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(body, want) || resp.Close {
			t.Fatalf("h1, pipelined request %d on the same connection: %v %v %q", i+1, resp, err, body)
		}
	}
}
