package forward

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/groveml/grove/servables"
)

// allKinds are every servables.Kind but OK, found by name.
func allKinds() []servables.Kind {
	var ks []servables.Kind
	for k := servables.OK + 1; k.String() != "unknown"; k++ {
		ks = append(ks, k)
	}
	return ks
}

func TestKindTables(t *testing.T) {
	if n := len(allKinds()); n < 11 {
		t.Fatalf("found %d kinds, servables declares at least 11", n)
	}
	// The kinds a code alone carries back (the others need the trailer).
	sameByCode := map[servables.Kind]bool{servables.NotFound: true, servables.InvalidInput: true, servables.Overloaded: true,
		servables.DeadlineExceeded: true, servables.Canceled: true, servables.Unavailable: true, servables.Conflict: true}
	for _, k := range allKinds() {
		if got := servables.KindOf(sentinel(k)); got != k {
			t.Errorf("sentinel(%v) is of kind %v", k, got)
		}
		if got, ok := parseKind(k.String()); !ok || got != k {
			t.Errorf("parseKind(%q) = %v, %v", k.String(), got, ok)
		}
		if Code(k) == codes.OK {
			t.Errorf("kind %v answers OK", k)
		}
		if got := KindOfCode(Code(k)); sameByCode[k] && got != k {
			t.Errorf("kind %v -> code %v -> kind %v", k, Code(k), got)
		}
		e := &RemoteError{Node: "b", Addr: "127.0.0.1:1", Kind: k, Message: "boom"}
		if servables.KindOf(e) != k || !errors.Is(e, sentinel(k)) {
			t.Errorf("RemoteError of kind %v: KindOf = %v", k, servables.KindOf(e))
		}
		if !strings.Contains(e.Error(), "node b (127.0.0.1:1): boom") {
			t.Errorf("RemoteError text %q", e.Error())
		}
	}
	for _, s := range []string{"", "ok", "unknown", "NotFound"} {
		if k, ok := parseKind(s); ok {
			t.Errorf("parseKind(%q) = %v, want none", s, k)
		}
	}
	for c, want := range map[codes.Code]servables.Kind{codes.OK: servables.OK, codes.Unauthenticated: servables.Execution,
		codes.PermissionDenied: servables.Execution, codes.Unimplemented: servables.Execution, codes.Internal: servables.Execution,
		codes.Unknown: servables.Execution, codes.OutOfRange: servables.InvalidInput} {
		if got := KindOfCode(c); got != want {
			t.Errorf("KindOfCode(%v) = %v, want %v", c, got, want)
		}
	}
}
