package grpcserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/groveml/grove/auth"
)

// oipLike registers three methods of the OIP service's name (ServerLive
// open, ModelInfer infer, RepositoryModelLoad manage) that answer the
// caller's name in the "who" trailer, counting the messages they decoded.
func oipLike(s Registrar, decoded *int) {
	handler := func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		*decoded++
		if err := dec(new(emptypb.Empty)); err != nil {
			return nil, err
		}
		id, _ := auth.FromContext(ctx)
		_ = grpc.SetTrailer(ctx, metadata.Pairs("who", id.Name))
		return new(emptypb.Empty), nil
	}
	desc := grpc.ServiceDesc{ServiceName: "inference.GRPCInferenceService", HandlerType: (*any)(nil)}
	roles := map[string]auth.Role{"ServerLive": auth.Open, "ModelInfer": auth.RoleInfer, "RepositoryModelLoad": auth.RoleManage}
	for _, m := range []string{"ServerLive", "ModelInfer", "RepositoryModelLoad"} {
		desc.Methods = append(desc.Methods, grpc.MethodDesc{MethodName: m, Handler: handler})
	}
	s.Register(&desc, struct{}{}, roles)
}

func TestAuthChecksCredentialsBeforeTheMessage(t *testing.T) {
	var b strings.Builder
	b.WriteString("tokens:\n")
	for tok, spec := range map[string]string{"t-infer": "bidder: [infer]", "t-read": "console: [read]", "t-tiny": "tiny: [infer, manage]"} {
		h := sha256.Sum256([]byte(tok))
		name, roles, _ := strings.Cut(spec, ": ")
		fmt.Fprintf(&b, "  - {name: %s, sha256: %s, roles: %s}\n", name, hex.EncodeToString(h[:]), roles)
	}
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(0, 0)
	a, err := auth.New(auth.Config{TokensFile: path, Limits: []auth.Limit{{Name: "tiny", RPS: 1, Burst: 1}},
		Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Auth: a})
	var decoded int
	oipLike(s, &decoded)
	conn := dial(t, s)
	for _, c := range []struct {
		method, token string
		code          codes.Code
		msg           string
		decodes       bool
	}{
		{"/grpc.health.v1.Health/Check", "", codes.OK, "", false},
		{"/inference.GRPCInferenceService/ServerLive", "", codes.OK, "", true},
		{"/inference.GRPCInferenceService/ModelInfer", "", codes.Unauthenticated, "no credentials", false},
		{"/inference.GRPCInferenceService/ModelInfer", "nope", codes.Unauthenticated, "unknown bearer token", false},
		{"/inference.GRPCInferenceService/ModelInfer", "t-read", codes.PermissionDenied, `token "console" lacks role infer`, false},
		{"/inference.GRPCInferenceService/ModelInfer", "t-infer", codes.OK, "bidder", true},
		{"/inference.GRPCInferenceService/RepositoryModelLoad", "t-infer", codes.PermissionDenied, "lacks role manage", false},
		{"/inference.GRPCInferenceService/RepositoryModelLoad", "t-tiny", codes.OK, "tiny", true},
		{"/inference.GRPCInferenceService/ModelInfer", "t-tiny", codes.ResourceExhausted, "over its request limit; retry after 1 s", false},
		{"/no.Such/Method", "", codes.Unauthenticated, "", false},
		{"/no.Such/Method", "t-read", codes.Unimplemented, "", false},
	} {
		ctx := t.Context()
		if c.token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+c.token)
		}
		before := decoded
		var err error
		var trailer metadata.MD
		if strings.HasPrefix(c.method, "/grpc.health") {
			_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		} else {
			err = conn.Invoke(ctx, c.method, &emptypb.Empty{}, &emptypb.Empty{}, grpc.Trailer(&trailer))
		}
		st := status.Convert(err)
		msg := st.Message()
		if w := trailer.Get("who"); len(w) > 0 {
			msg = w[0]
		}
		if st.Code() != c.code || !strings.Contains(msg, c.msg) {
			t.Errorf("%s (%s): %v %q, want %v %q", c.method, c.token, st.Code(), msg, c.code, c.msg)
		}
		if (decoded > before) != c.decodes {
			t.Errorf("%s (%s): message decoded: %v, want %v", c.method, c.token, decoded > before, c.decodes)
		}
		if c.token != "" && strings.Contains(st.Message(), c.token) {
			t.Errorf("%s: the error quotes the token", c.method)
		}
	}
}

// newAuthenticator returns an authenticator of one token, holding read.
func newAuthenticator(t *testing.T) *auth.Authenticator {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	h := sha256.Sum256([]byte("t-read"))
	if err := os.WriteFile(path, []byte("tokens:\n  - {name: console, sha256: "+hex.EncodeToString(h[:])+", roles: [read]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Config{TokensFile: path, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// newService describes a service new.Service with the unary methods
// named.
func newService(methods ...string) *grpc.ServiceDesc {
	desc := &grpc.ServiceDesc{ServiceName: "new.Service", HandlerType: (*any)(nil)}
	for _, m := range methods {
		desc.Methods = append(desc.Methods, grpc.MethodDesc{MethodName: m,
			Handler: func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) { return nil, nil }})
	}
	return desc
}

// TestCheckRolesNamesMethodsWithoutARole: a service registered past
// Register (as a generated RegisterXServer function does) has methods
// without a role, which CheckRoles names, and Serve refuses to start
// with, under Options.Auth.
func TestCheckRolesNamesMethodsWithoutARole(t *testing.T) {
	if err := New(Options{}).CheckRoles(); err != nil {
		t.Errorf("CheckRoles() of health and reflection = %v", err)
	}
	s := New(Options{Auth: newAuthenticator(t)})
	s.RegisterService(newService("Do"), struct{}{})
	err := s.CheckRoles()
	if err == nil || !strings.Contains(err.Error(), "/new.Service/Do has no role") || strings.Contains(err.Error(), "Health") || strings.Contains(err.Error(), "Reflection") {
		t.Errorf("CheckRoles() = %v", err)
	}
	ln, lerr := net.Listen("tcp", "127.0.0.1:0")
	if lerr != nil {
		t.Fatal(lerr)
	}
	defer ln.Close()
	if err := s.Serve(ln); err == nil || !strings.Contains(err.Error(), "/new.Service/Do has no role") {
		t.Errorf("Serve() = %v, want the method without a role", err)
	}
}

// TestRegisterRefusesAMethodWithoutAValidRole: Register panics, naming
// the method, for a method without a role or with one no method can
// need, and for a role naming no method of the service; the service is
// then not registered.
func TestRegisterRefusesAMethodWithoutAValidRole(t *testing.T) {
	for _, c := range []struct {
		roles map[string]auth.Role
		want  string
	}{
		{map[string]auth.Role{"Do": auth.RoleInfer}, "/new.Service/Undo has no valid role: no role given"},
		{map[string]auth.Role{"Do": auth.RoleInfer, "Undo": ""}, "/new.Service/Undo has no valid role: no role given"},
		{map[string]auth.Role{"Do": auth.RoleInfer, "Undo": "root"}, `/new.Service/Undo has no valid role: "root" is not a role`},
		{map[string]auth.Role{"Do": auth.RoleInfer, "Undo": auth.Open, "Redo": auth.RoleRead}, "service new.Service has no method Redo"},
	} {
		s := New(Options{})
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), c.want) {
					t.Errorf("Register with roles %v: recover() = %v, want %q", c.roles, r, c.want)
				}
			}()
			s.Register(newService("Do", "Undo"), struct{}{}, c.roles)
		}()
		if _, ok := s.GetServiceInfo()["new.Service"]; ok {
			t.Errorf("roles %v: the service was registered", c.roles)
		}
	}
	s := New(Options{})
	s.Register(newService("Do", "Undo"), struct{}{}, map[string]auth.Role{"Do": auth.RoleInfer, "Undo": auth.Open})
	for m, want := range map[string]auth.Role{"/new.Service/Do": auth.RoleInfer, "/new.Service/Undo": auth.Open,
		"/grpc.health.v1.Health/Check": auth.Open, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo": auth.RoleRead} {
		if got, ok := s.Role(m); !ok || got != want {
			t.Errorf("Role(%s) = %q, %v; want %q", m, got, ok, want)
		}
	}
	if err := s.CheckRoles(); err != nil {
		t.Errorf("CheckRoles() = %v", err)
	}
}

// TestStreamMessagesAreAuthorizedEach checks that every message of a
// client stream is taken from the caller's limit (one stream must not
// carry any number of inferences past it) and needs credentials that
// still work (a token removed from its file stops an open stream).
func TestStreamMessagesAreAuthorizedEach(t *testing.T) {
	var b strings.Builder
	b.WriteString("tokens:\n")
	for tok, spec := range map[string]string{"t-infer": "bidder: [infer]", "t-tiny": "tiny: [infer]"} {
		h := sha256.Sum256([]byte(tok))
		name, roles, _ := strings.Cut(spec, ": ")
		fmt.Fprintf(&b, "  - {name: %s, sha256: %s, roles: %s}\n", name, hex.EncodeToString(h[:]), roles)
	}
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Unix(0, 0)
	a, err := auth.New(auth.Config{TokensFile: path, Limits: []auth.Limit{{Name: "tiny", RPS: 1, Burst: 2}},
		Now: func() time.Time { return now }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Auth: a})
	received := make(chan int, 1)
	s.Register(&grpc.ServiceDesc{ServiceName: "inference.GRPCInferenceService", HandlerType: (*any)(nil),
		Streams: []grpc.StreamDesc{{StreamName: "ModelStreamInfer", ClientStreams: true, ServerStreams: true,
			Handler: func(_ any, ss grpc.ServerStream) error {
				n := 0
				defer func() { received <- n }()
				for {
					if err := ss.RecvMsg(new(emptypb.Empty)); err != nil {
						return err
					}
					n++
					if err := ss.SendMsg(new(emptypb.Empty)); err != nil {
						return err
					}
				}
			}}}}, struct{}{}, map[string]auth.Role{"ModelStreamInfer": auth.RoleInfer})
	conn := dial(t, s)
	desc := &grpc.StreamDesc{ClientStreams: true, ServerStreams: true}
	run := func(token string, between func(i int)) (int, error) {
		ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+token)
		st, err := conn.NewStream(ctx, desc, "/inference.GRPCInferenceService/ModelStreamInfer")
		if err != nil {
			t.Fatal(err)
		}
		var rerr error
		for i := range 5 {
			if between != nil {
				between(i)
			}
			if err := st.SendMsg(new(emptypb.Empty)); err != nil {
				break
			}
			if rerr = st.RecvMsg(new(emptypb.Empty)); rerr != nil {
				break
			}
		}
		if rerr == nil {
			_ = st.CloseSend()
			rerr = st.RecvMsg(new(emptypb.Empty))
		}
		return <-received, rerr
	}
	// tiny's limit is a burst of 2: the stream's first request and one
	// more message, then RESOURCE_EXHAUSTED.
	n, err := run("t-tiny", nil)
	if st := status.Convert(err); n != 2 || st.Code() != codes.ResourceExhausted {
		t.Errorf("a stream past its limit: %d messages served, %v; want 2, RESOURCE_EXHAUSTED", n, err)
	}
	// bidder's token removed from the file after its second message.
	n, err = run("t-infer", func(i int) {
		if i == 2 {
			if err := os.WriteFile(path, []byte("tokens: []\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			a.Refresh()
		}
	})
	if st := status.Convert(err); n != 2 || st.Code() != codes.Unauthenticated {
		t.Errorf("a stream whose token was removed: %d messages served, %v; want 2, UNAUTHENTICATED", n, err)
	}
}
