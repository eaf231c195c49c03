package conf

import (
	"strings"
	"testing"
)

func TestParseBucketURLAcceptsAnySchemeWithALocation(t *testing.T) {
	for _, raw := range []string{"file:///srv/models", "file://./rel/dir", "file://.", "gs://bucket", "gs://b/a/b/",
		"s3://b/p", "FILE:///upper", "x-y+z.1://anything/at/all"} {
		u, err := ParseBucketURL(raw)
		if err != nil {
			t.Errorf("%s: %v", raw, err)
			continue
		}
		if want, _, _ := strings.Cut(raw, ":"); u.Scheme != strings.ToLower(want) {
			t.Errorf("%s: scheme %q", raw, u.Scheme)
		}
	}
}

func TestParseBucketURLNamesWhatIsWrong(t *testing.T) {
	for _, tc := range []struct{ raw, want string }{
		{"", "no scheme"},
		{"/srv/models", "no scheme"},
		{"models", "no scheme"},
		{"file:rel", `want file://location, with two slashes`},
		{"file:/abs", `want file://location, with two slashes`},
		{"gs:", `want gs://location, with two slashes`},
		{"gs://user@b", "user information is not allowed"},
		{"s3://key:secret@b/p", "user information is not allowed"},
		{"gs://b?x=1", "a query is not allowed"},
		{"gs://b?", "a query is not allowed"},
		{"gs://b#frag", "a fragment is not allowed"},
		{"gs://b#", "a fragment is not allowed"},
		{"gs://b/%zz", "invalid URL escape"},
		{"1s://b", "first path segment in URL cannot contain colon"},
	} {
		_, err := ParseBucketURL(tc.raw)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "invalid bucket URL ") {
			t.Errorf("%q: got %v, want an invalid bucket URL error saying %q", tc.raw, err, tc.want)
		}
	}
}

func FuzzParseBucketURL(f *testing.F) {
	for _, seed := range []string{"file:///srv/models", "file://./rel", "gs://b/p", "s3://b", "gs://u@b", "gs://b?x", "gs://b#",
		"file:rel", "", "%", "s3://b/%2F/p"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := ParseBucketURL(raw)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "invalid bucket URL ") {
				t.Fatalf("%q: error %q does not say it is an invalid bucket URL", raw, err)
			}
			return
		}
		if u.Scheme == "" || !strings.HasPrefix(strings.ToLower(raw), u.Scheme+"://") ||
			u.User != nil || u.RawQuery != "" || strings.Contains(raw, "#") {
			t.Fatalf("%q accepted as %#v", raw, u)
		}
	})
}
