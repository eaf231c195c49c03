package main

import (
	"fmt"
	"log/slog"
	"net"

	"github.com/groveml/grove/transport/connlimit"
)

// listen listens on addr for the listener named name ("http",
// "admin_http", "grpc", "admin_grpc": the label of its connection
// metrics and log lines), holding at most max connections. conns is the
// process's one set of connection metrics (serveUntil makes it, since
// connlimit.NewMetrics registers them), shared by every listener.
func listen(addr, name string, max int, conns *connlimit.Metrics, log *slog.Logger) (*connlimit.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for %s: %w", name, err)
	}
	return connlimit.New(ln, connlimit.Options{Name: name, Max: max, Metrics: conns, Logger: log}), nil
}
