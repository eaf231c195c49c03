package forward

import (
	"context"
	"fmt"
	"time"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/servables"
)

// Priority is whose work a request is: the serving node's model mailbox
// takes User requests before Shadow copies.
type Priority uint8

// The priorities. The zero Priority is not one: Forward refuses it.
const (
	// User is a request whose answer goes back to a client.
	User Priority = iota + 1
	// Shadow is a copy for a contract's challenger, whose answer is only
	// logged.
	Shadow
)

// String returns "user" or "shadow".
func (p Priority) String() string {
	switch p {
	case User:
		return "user"
	case Shadow:
		return "shadow"
	}
	return fmt.Sprintf("Priority(%d)", uint8(p))
}

// Request is one model request (an item of a client's batch) handed to a
// peer.
type Request struct {
	// ModelPath is the model's path in the bucket ("pctr_v1/").
	ModelPath string
	// Inputs are the request's tensors, in the client's order.
	Inputs []servables.Tensor
	// Positional says the protocol gives inputs in the model's order
	// (actors.Request.Positional).
	Positional bool
	// TypeNamed says the inputs are named after their types
	// (actors.Request.TypeNamed).
	TypeNamed bool
	// RequestID identifies the client's call.
	RequestID string
	// Priority is User or Shadow.
	Priority Priority
	// Caller is the client as the node that took the request
	// authenticated it; the serving node believes it only from a peer
	// with a verified member certificate.
	Caller auth.Identity
	// API names the front end the client called ("ba", ...).
	API string
	// Configs are the client's key/value settings.
	Configs map[string]string
	// Contract and Release name the contract servable this model is, empty
	// for a direct model call.
	Contract, Release string
	// StartBy, for a Shadow copy, is when the serving node must have
	// started running it: past it the node drops the copy unrun, as it
	// drops its own copies past its shadow_timeout, while ctx's deadline
	// bounds the run. Zero: no start bound, ctx's deadline bounds both. A
	// serving node ignores it on a User request.
	StartBy time.Time
}

// ForwardedRequest is a Request as the serving node's Local receives it.
type ForwardedRequest struct {
	Request
	// Peer is the name of the node that forwarded it (its verified client
	// certificate's name, auth.CertificateName); empty when the peer
	// presented none (a server that allows unauthenticated peers).
	Peer string
}

// Answer is a model's answer to a Request.
type Answer struct {
	// Node is the name of the node whose model answered (set by the
	// Server; a Local leaves it empty).
	Node string
	// Checksum identifies the model content that answered.
	Checksum string
	// Outputs are the model's outputs, in its order.
	Outputs []servables.Tensor
	// UnnamedOutputs says the Outputs' names are placeholders
	// (actors.Result.UnnamedOutputs).
	UnnamedOutputs bool
	// Queued is the time the request waited in the model's queue, Compute
	// the model's forward time, both on the serving node.
	Queued, Compute time.Duration
}

// Local runs forwarded requests on the serving node's own ready models;
// the node implements it with its model actors. Predict must serve the
// request locally or fail, never forward it (its context says Forwarded,
// and a Client refuses such a context); it must return when ctx is done.
// Its error's servables.Kind reaches the caller's node unchanged: a model
// not ready here is Unavailable (the caller then tries another replica),
// one not served at all NotFound.
type Local interface {
	Predict(ctx context.Context, req ForwardedRequest) (Answer, error)
}

// AsyncLocal is a Local that can also answer without a goroutine waiting
// for it: the framed transport's reader hands each call to PredictAsync
// and goes on reading, and done writes the answer (one longer than a
// frame: hands it to a goroutine that writes it). done must be called
// exactly once, on any goroutine (PredictAsync's own included), when the
// answer is known or ctx is done; it writes to the connection and must
// not be called with locks held that the connection's writer could need.
// A panic in done (a bug in the transport) reaches its caller, which
// should recover and log it, once the connection has freed the call (one
// raised making the answer first fails the call Internal). A PredictAsync
// that panics (a bug) before calling done fails the call Internal, and
// its connection closes; a later call of done is then ignored.
type AsyncLocal interface {
	Local
	PredictAsync(ctx context.Context, req ForwardedRequest, done func(Answer, error))
}

// LocalFunc makes a function a Local.
type LocalFunc func(ctx context.Context, req ForwardedRequest) (Answer, error)

// Predict calls f.
func (f LocalFunc) Predict(ctx context.Context, req ForwardedRequest) (Answer, error) {
	return f(ctx, req)
}

// Peer is a node a request can be forwarded to.
type Peer struct {
	// Name is the node's name (cluster.node_name), for errors and logs.
	Name string
	// Addr is the host:port the node advertises to its peers
	// (cluster.advertise); connections are pooled by it.
	Addr string
}

// forwardedKey marks the context of a request a Server received.
type forwardedKey struct{}

// Forwarded reports whether ctx is that of a request another node
// forwarded here: such a request is served locally or fails, and a
// Client refuses to forward it again.
func Forwarded(ctx context.Context) bool {
	v, _ := ctx.Value(forwardedKey{}).(bool)
	return v
}

// ErrSecondHop is the error of Forward called with a Forwarded context: a
// request travels at most one hop. It is Unavailable, so that the node
// that forwarded it tries another replica.
var ErrSecondHop = servables.NewError(servables.Unavailable, "a forwarded request is served where it arrives or not at all: it travels one hop")

// ErrNoPeer is the error of Forward given no peer to forward to
// (Unavailable: no node has the model ready).
var ErrNoPeer = servables.NewError(servables.Unavailable, "no peer to forward to")
