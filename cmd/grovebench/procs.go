package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/groveml/grove/internal/tiedproc"
)

// stopGrace is how long a server gets to exit after SIGTERM before SIGKILL.
const stopGrace = 20 * time.Second

// child is a server process started by grovebench. It runs in its own
// process group, so Ctrl-C reaches only grovebench, which then stops the
// whole group; its output goes to a log file.
type child struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	done    chan struct{} // closed when the process has exited
	err     error         // the Wait error, valid once done is closed
}

// startChild starts cmd with output to logPath.
func startChild(name string, cmd *exec.Cmd, logPath string) (*child, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = childSysProcAttr()
	waited, err := tiedproc.Start(cmd)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{name: name, cmd: cmd, logPath: logPath, logFile: f, done: make(chan struct{})}
	go func() {
		c.err = <-waited
		close(c.done)
	}()
	return c, nil
}

// exited reports whether the process has exited.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM to the process group, waits up to stopGrace, then
// SIGKILLs it. It is idempotent. It returns an error only if the process
// had to be killed.
func (c *child) stop() error {
	defer c.logFile.Close()
	if c.exited() {
		return nil
	}
	pid := c.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGTERM)
	select {
	case <-c.done:
		return nil
	case <-time.After(stopGrace):
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-c.done
	return fmt.Errorf("did not exit within %v of SIGTERM; killed", stopGrace)
}

// logTail returns the last n lines of the child's log.
func (c *child) logTail(n int) string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return ""
	}
	return tailLines(string(b), n)
}

// freeAddr returns a loopback address nobody listens on right now.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitReady polls url until ready accepts the status code, the child
// exits, ctx ends or timeout passes.
func waitReady(ctx context.Context, c *child, url string, timeout time.Duration, ready func(code int) bool) error {
	return waitReadyWith(ctx, c, &http.Client{Timeout: 2 * time.Second}, url, timeout, ready)
}

// waitReadyWith is waitReady with the given client (an https one for a TLS server).
func waitReadyWith(ctx context.Context, c *child, client *http.Client, url string, timeout time.Duration, ready func(code int) bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if c.exited() {
			return fmt.Errorf("%s exited (%v) before it was ready; log tail:\n%s", c.name, c.err, c.logTail(30))
		}
		if req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil); err == nil {
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
				if ready(resp.StatusCode) {
					return nil
				}
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %v; log tail:\n%s", c.name, timeout, c.logTail(30))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runGo runs the go command in dir and returns its combined output. The
// go command runs in its own process group, all of which is killed if ctx
// ends (go test leaves its test binary running otherwise).
func runGo(ctx context.Context, goBin, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = childSysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	return out.Bytes(), err
}

// buildGrove builds ./cmd/grove of the repository at root into bin.
func buildGrove(ctx context.Context, goBin, root, bin string) error {
	out, err := runGo(ctx, goBin, root, "build", "-o", bin, "./cmd/grove")
	if err != nil {
		return fmt.Errorf("%v\n%s", err, tailLines(string(out), 40))
	}
	return nil
}

// startGrove starts grove serve, as the server named name (serverGrove or
// serverGroveLog), on a local-disk bucket and a free port and waits for GET
// /readyz to answer 200. The returned child, if not nil, must be stopped by
// the caller even when err is not nil.
func startGrove(ctx context.Context, name, bin, bucket, cacheDir, logPath string, extra []string, timeout time.Duration) (*child, *endpoint, error) {
	return startGroveWith(ctx, name, bin, bucket, cacheDir, logPath, extra, timeout, nil)
}

// startGroveWith is startGrove, and when sec is set, grove serves TLS and
// needs sec's token: the endpoint is https with sec's client TLS and the
// token's header.
func startGroveWith(ctx context.Context, name, bin, bucket, cacheDir, logPath string, extra []string, timeout time.Duration, sec *tlsAuth) (*child, *endpoint, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	grpcAddr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	args := append([]string{"serve", "--bucket", "file://" + bucket, "--http", addr, "--grpc", grpcAddr,
		"--poll-interval", "1s", "--cache-dir", cacheDir}, extra...)
	scheme, client := "http://", &http.Client{Timeout: 2 * time.Second}
	if sec != nil {
		args = append(args, sec.args()...)
		scheme, client = "https://", sec.httpClient()
	}
	c, err := startChild(name, exec.Command(bin, args...), logPath)
	if err != nil {
		return nil, nil, err
	}
	ep := groveEndpointFor(name, scheme+addr)
	ep.grpcAddr, ep.pid = grpcAddr, c.cmd.Process.Pid
	if sec != nil {
		ep.tlsConf, ep.headers = sec.clientTLS, []string{sec.header()}
	}
	err = waitReadyWith(ctx, c, client, ep.baseURL+"/readyz", timeout, func(code int) bool { return code == http.StatusOK })
	return c, ep, err
}

// predLogArgs are the grove serve arguments of the grove+log instance:
// the in-process Kafka broker on kafkaAddr and every direct call logged.
func predLogArgs(kafkaAddr string) []string {
	return []string{"--kafka-embedded", "--kafka-embedded-addr", kafkaAddr, "--prediction-log-level", "FULL"}
}

// errNoBaseline reports that the baseline cannot run on this machine.
var errNoBaseline = errors.New("baseline not available")

// startBaseline starts the FastAPI + uvicorn baseline (one torch thread) on
// model and a free port and waits until it answers HTTP. It returns an
// error wrapping errNoBaseline when the script or the python packages are
// missing. The returned child, if not nil, must be stopped by the caller.
func startBaseline(ctx context.Context, python, dir, model, logPath string, timeout time.Duration) (*child, *endpoint, error) {
	if _, err := os.Stat(dir + "/fastapi_baseline.py"); err != nil {
		return nil, nil, fmt.Errorf("%w: no fastapi_baseline.py in %s (set --baseline-dir)", errNoBaseline, dir)
	}
	check, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(check, python, "-c", "import fastapi, uvicorn, torch").CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("%w: %s cannot import fastapi, uvicorn and torch (%v: %s); "+
			"apt-get install python3-fastapi python3-uvicorn python3-torch", errNoBaseline, python, err, tailLines(string(out), 3))
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, nil, err
	}
	host, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(python, "-m", "uvicorn", "--app-dir", dir, "fastapi_baseline:app", "--host", host, "--port", port)
	cmd.Env = append(os.Environ(), "MODEL="+model, "THREADS=1")
	c, err := startChild("baseline", cmd, logPath)
	if err != nil {
		return nil, nil, err
	}
	ep := baselineEndpoint("http://" + addr)
	ep.pid = c.cmd.Process.Pid
	// Any HTTP answer (GET / is a 404) means uvicorn is up with the model loaded.
	err = waitReady(ctx, c, ep.baseURL+"/", timeout, func(int) bool { return true })
	return c, ep, err
}

// tailLines returns the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// writeGroveWrapper writes an executable script in dir that execs
// wrapper with bin and the script's own arguments, and returns its path:
// the grove binary every scenario starts when --grove-wrapper is given.
func writeGroveWrapper(dir string, wrapper []string, bin string) (string, error) {
	var b strings.Builder
	b.WriteString("#!/bin/sh\nexec")
	for _, w := range append(append([]string{}, wrapper...), bin) {
		b.WriteString(" '" + strings.ReplaceAll(w, "'", `'\''`) + "'")
	}
	b.WriteString(" \"$@\"\n")
	path := filepath.Join(dir, "grove-wrapped")
	if err := os.WriteFile(path, []byte(b.String()), 0o755); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}
