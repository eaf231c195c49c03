package grpcserver

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/groveml/grove/auth"
)

// tokenAuth returns an authenticator of the tokens given as token ->
// "name: [roles]".
func tokenAuth(t *testing.T, tokens map[string]string) *auth.Authenticator {
	t.Helper()
	var b strings.Builder
	b.WriteString("tokens:\n")
	for tok, spec := range tokens {
		h := sha256.Sum256([]byte(tok))
		name, roles, _ := strings.Cut(spec, ": ")
		fmt.Fprintf(&b, "  - {name: %s, sha256: %s, roles: %s}\n", name, hex.EncodeToString(h[:]), roles)
	}
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(auth.Config{TokensFile: path, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

const (
	loadMethod  = "/inference.GRPCInferenceService/RepositoryModelLoad"
	inferMethod = "/inference.GRPCInferenceService/ModelInfer"
)

func TestSplitServesAdminMethodsOnlyOnTheAdminServerWithItsLimit(t *testing.T) {
	a := tokenAuth(t, map[string]string{"t-manage": "ops: [manage]", "t-infer": "bidder: [infer]"})
	public := New(Options{Auth: a, MaxMessageBytes: 1 << 10,
		ServedElsewhere: map[string]string{loadMethod: "RepositoryModelLoad is served on the admin listener"}})
	admin := New(Options{Auth: a, MaxMessageBytes: 1 << 20})
	var decoded int
	oipLike(Split{Public: public, Admin: admin, AdminMethods: []string{loadMethod}}, &decoded)
	pub, adm := dial(t, public), dial(t, admin)

	big := wrapperspb.Bytes(make([]byte, 64<<10)) // over the public limit, within the admin one
	invoke := func(where string, method, token string, msg any) (codes.Code, string, bool) {
		t.Helper()
		conn := pub
		if where == "admin" {
			conn = adm
		}
		ctx := t.Context()
		if token != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
		}
		before := decoded
		st := status.Convert(conn.Invoke(ctx, method, msg, &emptypb.Empty{}))
		return st.Code(), st.Message(), decoded > before
	}
	for _, c := range []struct {
		where, method, token string
		msg                  any
		code                 codes.Code
		has                  string
		decodes              bool
	}{
		// On the public server the method is refused after the caller's
		// credentials and role, before its message is read: the same
		// answer for a message over the public limit.
		{"public", loadMethod, "", &emptypb.Empty{}, codes.Unauthenticated, "no credentials", false},
		{"public", loadMethod, "t-infer", &emptypb.Empty{}, codes.PermissionDenied, "lacks role manage", false},
		{"public", loadMethod, "t-manage", &emptypb.Empty{}, codes.Unimplemented, "served on the admin listener", false},
		{"public", loadMethod, "t-manage", big, codes.Unimplemented, "served on the admin listener", false},
		{"public", inferMethod, "t-infer", &emptypb.Empty{}, codes.OK, "", true},
		// (gRPC reads the message when the handler asks for it: the
		// handler runs, and the limit fails its reading.)
		{"public", inferMethod, "t-infer", big, codes.ResourceExhausted, "larger than max", true},
		// On the admin server, with its own limit and the same roles.
		{"admin", loadMethod, "t-manage", big, codes.OK, "", true},
		{"admin", loadMethod, "t-infer", &emptypb.Empty{}, codes.PermissionDenied, "lacks role manage", false},
		{"admin", inferMethod, "t-infer", &emptypb.Empty{}, codes.Unimplemented, "", false},
	} {
		code, msg, decoded := invoke(c.where, c.method, c.token, c.msg)
		if code != c.code || !strings.Contains(msg, c.has) || decoded != c.decodes {
			t.Errorf("%s %s (%q): %v %q, decoded %v; want %v %q, decoded %v", c.where, c.method, c.token, code, msg, decoded, c.code, c.has, c.decodes)
		}
	}
	if r, ok := admin.Role(loadMethod); !ok || r != auth.RoleManage {
		t.Errorf("admin role of %s: %q %v, want manage", loadMethod, r, ok)
	}
	if _, ok := admin.Role(inferMethod); ok {
		t.Errorf("the admin server declares %s, which it does not serve", inferMethod)
	}
	// The admin server answers probes.
	if r, err := healthpb.NewHealthClient(adm).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil || r.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("admin health: %v %v", r, err)
	}
}

func TestSplitWithoutAdminRegistersOnThePublicServerAlone(t *testing.T) {
	public := New(Options{})
	var decoded int
	oipLike(Split{Public: public, AdminMethods: []string{loadMethod}}, &decoded)
	if err := dial(t, public).Invoke(t.Context(), loadMethod, &emptypb.Empty{}, &emptypb.Empty{}); err != nil || decoded != 1 {
		t.Errorf("%s without an admin server: %v, decoded %d; want it served", loadMethod, err, decoded)
	}
}

func TestServeRefusesAMethodServedElsewhereThatIsNotRegistered(t *testing.T) {
	s := New(Options{ServedElsewhere: map[string]string{"/inference.GRPCInferenceService/RepositoryModelLaod": "elsewhere"}})
	var decoded int
	oipLike(s, &decoded)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := s.Serve(ln); err == nil || !strings.Contains(err.Error(), "RepositoryModelLaod") {
		t.Errorf("Serve: %v, want an error naming the misspelt method", err)
	}
}
