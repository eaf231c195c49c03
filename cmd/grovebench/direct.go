package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/groveml/grove/api/ba"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/torch"
)

// The direct server: grove's own B&A codec and TorchScript servable called
// straight from an HTTP handler, with no actors between them. Each request
// is parsed with api/ba, each item runs the servable's Predict on the
// handler's goroutine (concurrent calls, as libtorch allows; no queue, no
// dynamic batching) and the answer is written with api/ba. grove over it
// is what the actor layer (the router, the model actor's mailbox, the
// hops between goroutines, and what they buy: one queue per model,
// batching, deadlines, shadows, hot swaps) costs and gains.
//
// grovebench runs it as a child: its own binary with directEnv set to
// "HTTPADDR,MODELFILE".
const directEnv = "GROVEBENCH_DIRECT_SERVER"

// serveDirect serves the model file in spec until the process is killed;
// it returns only on a start-up error.
func serveDirect(spec string) error {
	addr, file, ok := strings.Cut(spec, ",")
	if !ok {
		return fmt.Errorf("%s=%q: want HTTPADDR,MODELFILE", directEnv, spec)
	}
	sv, err := torch.Runtime{}.Load(context.Background(), filepath.Dir(file), []string{filepath.Base(file)}, servables.LoadOptions{IntraOpThreads: 1})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	bufs := sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
			w.Write(ba.AppendBatchError((*out)[:0], perr, ""))
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
		w.Write(resp)
		*out = resp[:0]
	}), ReadHeaderTimeout: 10 * time.Second}
	return hs.Serve(ln)
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

// startDirect starts the direct server on the model file as a child
// process (this binary again) and waits until it answers. The returned
// child, if not nil, must be stopped by the caller.
func startDirect(ctx context.Context, logPath, modelFile string, timeout time.Duration) (*child, *endpoint, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), directEnv+"="+addr+","+modelFile)
	c, err := startChild(serverDirect, cmd, logPath)
	if err != nil {
		return nil, nil, err
	}
	ep := groveEndpointFor(serverDirect, "http://"+addr)
	ep.api = "POST /v1/inference (codec + servable, no actors)"
	ep.pid = c.cmd.Process.Pid
	err = waitReady(ctx, c, ep.url, timeout, func(code int) bool { return code == http.StatusBadRequest })
	return c, ep, err
}
