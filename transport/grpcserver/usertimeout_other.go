//go:build !linux

package grpcserver

import (
	"net"
	"time"
)

// setUserTimeout does nothing: TCP_USER_TIMEOUT is Linux's (gRPC sets it
// only there too).
func setUserTimeout(net.Conn, time.Duration) error { return nil }
