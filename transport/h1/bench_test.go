package h1

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// BenchmarkServe is a keep-alive POST with a small JSON body and a small
// answer over loopback, served by h1 and by net/http: time and
// allocations per request, the client's included (a hand-written one,
// which allocates nothing per request).
func BenchmarkServe(b *testing.B) {
	body := `{"request":[{"model_path":"pctr_v1/","tensors":[{"data_type":"FLOAT","tensor_shape":[1,4],"tensor_content":["0.1","0.2","0.3","0.4"]}]}]}`
	answer := []byte(`{"response":[{"model_path":"pctr_v1/","tensors":[{"tensor_shape":[1,1],"data_type":"FLOAT","tensor_content":[0.5]}]}]}`)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header()["Content-Type"] = []string{"application/json"}
		_, _ = w.Write(answer)
	})
	req := fmt.Sprintf("POST /v1/inference HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	for _, engine := range []string{"h1", "net/http"} {
		b.Run(strings.ReplaceAll(engine, "/", ""), func(b *testing.B) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			if engine == "h1" {
				s := New(h, Options{})
				go func() { _ = s.Serve(ln) }()
				defer s.Close()
			} else {
				s := &http.Server{Handler: h}
				go func() { _ = s.Serve(ln) }()
				defer s.Close()
			}
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			read := func() {
				n := 0
				for {
					line, err := br.ReadSlice('\n')
					if err != nil {
						b.Fatal(err)
					}
					if len(line) == 2 {
						break
					}
					if v, ok := bytes.CutPrefix(line, []byte("Content-Length: ")); ok {
						for _, d := range bytes.TrimSpace(v) {
							n = 10*n + int(d-'0')
						}
					}
				}
				if _, err := br.Discard(n); err != nil {
					b.Fatal(err)
				}
			}
			out := []byte(req)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(out); err != nil {
					b.Fatal(err)
				}
				read()
			}
		})
	}
}
