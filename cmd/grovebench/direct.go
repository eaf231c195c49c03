package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/groveml/grove/api/ba/batest"
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/torch"
	"github.com/groveml/grove/transport/h1"
)

// The direct server: grove's own B&A codec and TorchScript servable called
// straight from an HTTP handler, with no actors between them
// (batest.DirectHandler), served by transport/h1 as grove's plaintext HTTP
// listener is by default. grove over it is what the actor layer (the
// router, the model actor's mailbox, the hops between goroutines, and what
// they buy: one queue per model, batching, deadlines, shadows, hot swaps)
// costs and gains.
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
	return h1.New(batest.DirectHandler(sv), h1.Options{ReadHeaderTimeout: 10 * time.Second}).Serve(ln)
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
