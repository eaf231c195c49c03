package h2guard

import (
	"context"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"
)

// Creds returns gRPC server transport credentials that make inner's
// handshake (none when inner is nil: plaintext, as a server without
// credentials) and guard the connection it returns; give them to
// grpc.Creds. The AuthInfo is inner's (nil in plaintext, as without
// credentials). They do not dial.
//
// A new connection whose peer the Guard closed recently is held first,
// before inner's handshake: grpc-go runs each accepted connection's
// handshake on a goroutine of its own (Server.handleRawConn), so the
// hold delays that connection only, never the accept loop.
func (g *Guard) Creds(inner credentials.TransportCredentials) credentials.TransportCredentials {
	return &creds{g: g, inner: inner}
}

// creds are the credentials Creds returns.
type creds struct {
	g     *Guard
	inner credentials.TransportCredentials // nil: plaintext
}

func (c *creds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	// The hold is bounded by holdFor's most (2 s), well within the
	// deadline grpc-go sets on raw for the handshake (120 s), which
	// ServerHandshake cannot see.
	c.g.hold(context.Background(), raw)
	if c.inner == nil {
		return c.g.wrap(raw, raw), nil, nil
	}
	conn, info, err := c.inner.ServerHandshake(raw)
	if err != nil {
		return conn, info, err // credentials.ErrConnDispatched among them, which gRPC reads as is
	}
	return c.g.wrap(conn, raw), info, nil
}

func (c *creds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("h2guard: server credentials do not dial")
}

func (c *creds) Info() credentials.ProtocolInfo {
	if c.inner == nil {
		return credentials.ProtocolInfo{SecurityProtocol: "insecure"}
	}
	return c.inner.Info()
}

func (c *creds) Clone() credentials.TransportCredentials {
	if c.inner == nil {
		return &creds{g: c.g}
	}
	return &creds{g: c.g, inner: c.inner.Clone()}
}

// OverrideServerName is unused by gRPC, and a server's name is its
// certificate's.
func (c *creds) OverrideServerName(string) error { return nil }
