// Package batest holds what Grove's benchmarks compare the B&A API
// against: the direct server, the B&A codec and one servable with nothing
// between them.
package batest

import (
	"io"
	"net/http"
	"sync"

	"github.com/groveml/grove/api/ba"
	"github.com/groveml/grove/servables"
)

// DirectHandler is the direct server's handler: each request is parsed
// with api/ba, each item runs sv's Predict on the handler's goroutine
// (concurrent calls, as the runtimes allow; no queue, no dynamic
// batching) and the answer is written with api/ba, from pooled buffers.
// Grove over it is what the actor layer and httpserver (routes, limits,
// deadlines, metrics) cost and gain. grovebench's direct row serves it,
// and cmd/grove's BenchmarkDirectInferenceHTTP in process.
func DirectHandler(sv servables.Servable) http.Handler {
	bufs := sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, out := bufs.Get().(*[]byte), bufs.Get().(*[]byte)
		defer bufs.Put(in)
		defer bufs.Put(out)
		body, err := readAll(r.Body, (*in)[:0])
		*in = body[:0]
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req, perr := ba.ParseOptions{}.ParseRequest(body)
		w.Header().Set("Content-Type", "application/json")
		if perr != nil {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write(ba.AppendBatchError((*out)[:0], perr, ""))
			return
		}
		results := make([]ba.Result, len(req.Items))
		for i, it := range req.Items {
			results[i] = ba.Result{ModelPath: it.ModelPath, Err: it.Err}
			if it.Err != nil {
				continue
			}
			if results[i].Outputs, err = sv.Predict(r.Context(), it.Inputs); err != nil {
				results[i].Err, _ = ba.ItemError(it.ModelPath, err)
			}
		}
		resp := ba.AppendResponse((*out)[:0], results)
		_, _ = w.Write(resp)
		*out = resp[:0]
	})
}

// readAll reads r into buf, growing it as needed.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
