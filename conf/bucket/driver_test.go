package bucket

import (
	"context"
	"strings"
	"testing"
)

// memoryDriver is a driver of scheme whose buckets are empty memory buckets named by their URL.
func memoryDriver(scheme string) Driver {
	return Driver{Scheme: scheme, Open: func(_ context.Context, rawURL string) (Bucket, error) {
		return NewMemory(rawURL, nil), nil
	}}
}

func TestDriversOpenWithTheDriverOfTheScheme(t *testing.T) {
	ds := Drivers{memoryDriver("one"), memoryDriver("two")}
	for _, raw := range []string{"one://x", "two://y/z", "TWO://y"} {
		b, err := ds.Open(t.Context(), raw)
		if err != nil || b.String() != raw {
			t.Errorf("Open(%s) = %v, %v", raw, b, err)
		}
	}
}

func TestDriversOpenOfAnUnknownSchemeListsTheSchemes(t *testing.T) {
	ds := Drivers{memoryDriver("two"), memoryDriver("one")}
	_, err := ds.Open(t.Context(), "three://x")
	want := `invalid bucket URL "three://x": unsupported scheme "three"; this build has one://, two://`
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
	if _, err := ds.Open(t.Context(), "one:x"); err == nil || !strings.Contains(err.Error(), "two slashes") {
		t.Errorf("malformed URL: got %v", err)
	}
}

func TestParseNamedURL(t *testing.T) {
	anyName := func(string) error { return nil }
	for _, tc := range []struct{ raw, name, prefix string }{
		{"x://b", "b", ""},
		{"x://b/", "b", ""},
		{"x://b/p", "b", "p/"},
		{"x://b/p/q/", "b", "p/q/"},
	} {
		name, prefix, err := ParseNamedURL(tc.raw, "x", anyName)
		if err != nil || name != tc.name || prefix != tc.prefix {
			t.Errorf("%s: got %q, %q, %v; want %q, %q", tc.raw, name, prefix, err, tc.name, tc.prefix)
		}
	}
	for _, tc := range []struct{ raw, want string }{
		{"y://b", "the scheme is not x"},
		{"x://b:1", "no port"},
		{"x://b:", "no port"},
		{"x://b//p", "empty"},
		{"x://b/p/./q", `"."`},
		{"x://b/..", `".."`},
		{"x://b/a%0Ab", "control character"},
	} {
		if _, _, err := ParseNamedURL(tc.raw, "x", anyName); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error saying %q", tc.raw, err, tc.want)
		}
	}
}
