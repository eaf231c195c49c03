//go:build !linux

package forward

import "net"

// limitUnsent does nothing where TCP_NOTSENT_LOWAT is not set (outside
// Linux): the socket's send buffer holds what it holds.
func limitUnsent(net.Conn, int) error { return nil }
