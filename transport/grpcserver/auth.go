package grpcserver

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/tap"

	"github.com/groveml/grove/auth"
)

// Authenticator is what the server asks about a call's caller
// (*auth.Authenticator is one).
type Authenticator interface {
	// GRPC returns the caller of a call from its context (which carries
	// its peer) and metadata, or an error wrapping auth.ErrUnauthenticated
	// that says why there is none.
	GRPC(ctx context.Context, md metadata.MD) (auth.Identity, error)
	// Allow takes one request from id's limit, or returns false and when
	// to retry.
	Allow(id auth.Identity) (ok bool, retryAfter time.Duration)
	// Begin counts a call of id in flight until its End, or returns an
	// error, for the caller, when id has too many in flight already.
	Begin(id auth.Identity) (auth.InFlight, error)
}

// Registrar is where a protocol registers its gRPC services, each with
// the role each of its methods needs; *Server is one.
type Registrar interface {
	// Register registers impl as the service desc describes, and the
	// role each of its methods needs, by method name.
	Register(desc *grpc.ServiceDesc, impl any, roles map[string]auth.Role)
}

// Register registers impl as the service desc describes (what its
// generated RegisterXServer function does), with the role each of its
// methods and streams needs, by method name (roles["ModelInfer"]):
// auth.Open for none, else one of auth.Roles, which Options.Auth checks.
// It panics, naming the method, when one has no role or a role no method
// can need (auth.CheckRequired), or when roles names a method the service
// lacks: a wiring mistake, so that no method goes unprotected by accident.
// Call it before Serve.
func (s *Server) Register(desc *grpc.ServiceDesc, impl any, roles map[string]auth.Role) {
	s.declare(desc, roles)
	s.RegisterService(desc, impl)
}

// declare records the role of each method of desc from roles (by method
// name), or panics as Register says.
func (s *Server) declare(desc *grpc.ServiceDesc, roles map[string]auth.Role) {
	names := make([]string, 0, len(desc.Methods)+len(desc.Streams))
	for _, m := range desc.Methods {
		names = append(names, m.MethodName)
	}
	for _, st := range desc.Streams {
		names = append(names, st.StreamName)
	}
	for name := range roles {
		if !slices.Contains(names, name) {
			panic(fmt.Sprintf("grpcserver: service %s has no method %s, which its roles name", desc.ServiceName, name))
		}
	}
	for _, name := range names {
		if err := auth.CheckRequired(roles[name]); err != nil {
			panic(fmt.Sprintf("grpcserver: gRPC method /%s/%s has no valid role: %v", desc.ServiceName, name, err))
		}
	}
	for _, name := range names {
		s.roles["/"+desc.ServiceName+"/"+name] = roles[name]
	}
}

// Role is the role the method of full name method
// ("/package.Service/Method") needs, as its service was registered with;
// false for a method registered without one (CheckRoles) or not
// registered.
func (s *Server) Role(method string) (auth.Role, bool) {
	r, ok := s.roles[method]
	return r, ok
}

// tapAuth checks a call's credentials, role (from roles, by full method
// name) and limit when its headers arrive, before any message is read:
// UNAUTHENTICATED, PERMISSION_DENIED naming the role, or
// RESOURCE_EXHAUSTED (with retry-after seconds in the message). An allowed
// call's context carries the identity.
func tapAuth(a Authenticator, roles map[string]auth.Role) tap.ServerInHandle {
	return func(ctx context.Context, info *tap.Info) (context.Context, error) {
		role, known := roles[info.FullMethodName]
		if known && role == auth.Open {
			return ctx, nil
		}
		id, err := a.GRPC(ctx, info.Header)
		if err != nil {
			return nil, status.Error(codes.Unauthenticated, auth.Reason(err))
		}
		if !known { // not a method of Grove's: gRPC answers UNIMPLEMENTED
			return auth.NewContext(ctx, id), nil
		}
		if !id.May(role) {
			return nil, status.Errorf(codes.PermissionDenied, "%s %q lacks role %s", id.Method, id.Name, role)
		}
		if ok, wait := a.Allow(id); !ok {
			secs := int(math.Ceil(max(wait, time.Second).Seconds()))
			return nil, status.Errorf(codes.ResourceExhausted, "%q is over its request limit; retry after %s s", id.Qualified(), strconv.Itoa(secs))
		}
		return auth.NewContext(ctx, id), nil
	}
}

// countInFlight counts each call of an identified caller (tapAuth put its
// identity in the context) among its calls in flight while its handler
// runs, and refuses one past auth.max_inflight_per_identity with
// RESOURCE_EXHAUSTED, as the request limit does, before the handler runs,
// with a retry pushback of 1 s (REST's Retry-After: 1).
// A stream counts as one call for as long as it is open. It counts in an
// interceptor, not in tapAuth: an interceptor's end is the call's, while
// a call refused after the tap (its message too large, its method
// unknown) would never give back a place the tap took.
type countInFlight struct{ a Authenticator }

// begin counts the call of ctx's caller, if it has one.
func (c countInFlight) begin(ctx context.Context) (auth.InFlight, error) {
	id, ok := auth.FromContext(ctx)
	if !ok {
		return auth.InFlight{}, nil
	}
	f, err := c.a.Begin(id)
	if err != nil {
		SetRetryPushback(ctx, time.Second)
		return auth.InFlight{}, status.Errorf(codes.ResourceExhausted, "%s; retry after 1 s", err.Error())
	}
	return f, nil
}

func (c countInFlight) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	f, err := c.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer f.End()
	return h(ctx, req)
}

func (c countInFlight) stream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	f, err := c.begin(ss.Context())
	if err != nil {
		return err
	}
	defer f.End()
	return h(srv, ss)
}

// streamAuth checks, for each message after the first of a client stream
// (ModelStreamInfer, Outcomes/Report), what tapAuth checked before the
// first: that the caller's credentials still carry the role
// (auth.Identity.May; a token removed from its file stops working on a
// stream already open too) and that the message is
// within the caller's limit, which a stream would otherwise bypass: one
// stream, one request taken from the limit, any number of inferences. A
// refused message ends the stream with UNAUTHENTICATED, PERMISSION_DENIED
// or RESOURCE_EXHAUSTED.
func streamAuth(a Authenticator, roles map[string]auth.Role) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		role, known := roles[info.FullMethod]
		if !known || role == auth.Open || !info.IsClientStream {
			return h(srv, ss)
		}
		return h(srv, &authStream{ServerStream: ss, a: a, role: role})
	}
}

// authStream authorizes each message after the first of its stream.
type authStream struct {
	grpc.ServerStream
	a    Authenticator
	role auth.Role
	n    int
}

func (s *authStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if s.n++; s.n == 1 { // authorized by tapAuth
		return nil
	}
	ctx := s.Context()
	md, _ := metadata.FromIncomingContext(ctx)
	id, err := s.a.GRPC(ctx, md)
	if err != nil {
		return status.Error(codes.Unauthenticated, auth.Reason(err))
	}
	if !id.May(s.role) {
		return status.Errorf(codes.PermissionDenied, "%s %q lacks role %s", id.Method, id.Name, s.role)
	}
	if ok, wait := s.a.Allow(id); !ok {
		secs := int(math.Ceil(max(wait, time.Second).Seconds()))
		return status.Errorf(codes.ResourceExhausted, "%q is over its request limit; retry after %s s", id.Qualified(), strconv.Itoa(secs))
	}
	return nil
}

// Methods lists the full names of every method of every registered
// service ("/package.Service/Method"), sorted.
func Methods(r interface {
	GetServiceInfo() map[string]grpc.ServiceInfo
}) []string {
	var out []string
	for name, info := range r.GetServiceInfo() {
		for _, m := range info.Methods {
			out = append(out, "/"+name+"/"+m.Name)
		}
	}
	sort.Strings(out)
	return out
}

// CheckRoles returns an error naming every registered method without a
// role: one whose service was registered with RegisterService (the
// embedded grpc.Server's, which a generated RegisterXServer function
// calls) rather than Register.
func (s *Server) CheckRoles() error {
	var errs []error
	for _, m := range Methods(s) {
		if _, ok := s.roles[m]; !ok {
			errs = append(errs, fmt.Errorf("gRPC method %s has no role: register its service with grpcserver's Register, giving it one (or auth.Open)", m))
		}
	}
	return errors.Join(errs...)
}
