package bucket

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"unicode"

	"github.com/groveml/grove/conf"
)

// Driver opens the buckets of one URL scheme.
type Driver struct {
	// Scheme is the URL scheme the driver serves, without "://".
	Scheme string
	// Open opens the bucket at rawURL, a URL of this scheme: it checks
	// the rest of the URL, with errors that name what is wrong, and returns
	// a Bucket that also implements io.Closer, and Writer if the store can
	// be written.
	Open func(ctx context.Context, rawURL string) (Bucket, error)
}

// Drivers is the set of bucket drivers a build has, one per scheme.
type Drivers []Driver

// Open opens the bucket at rawURL with the driver of its scheme. The
// bucket also implements io.Closer.
func (ds Drivers) Open(ctx context.Context, rawURL string) (Bucket, error) {
	u, err := conf.ParseBucketURL(rawURL)
	if err != nil {
		return nil, err
	}
	for _, d := range ds {
		if d.Scheme == u.Scheme {
			return d.Open(ctx, rawURL)
		}
	}
	return nil, fmt.Errorf("invalid bucket URL %q: unsupported scheme %q; this build has %s", rawURL, u.Scheme, strings.Join(ds.Schemes(), ", "))
}

// Schemes returns the drivers' schemes, sorted.
func (ds Drivers) Schemes() []string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = d.Scheme + "://"
	}
	slices.Sort(s)
	return s
}

// ParseNamedURL parses a bucket URL of the form scheme://name[/prefix],
// where name is a bucket name that checkName accepts and prefix is a
// directory: "gs://b/models" holds the object "models/x" as "x". The
// prefix it returns is empty or ends in "/".
func ParseNamedURL(raw, scheme string, checkName func(string) error) (name, prefix string, err error) {
	u, err := conf.ParseBucketURL(raw)
	if err != nil {
		return "", "", err
	}
	if u.Scheme != scheme {
		return "", "", fmt.Errorf("invalid bucket URL %q: the scheme is not %s", raw, scheme)
	}
	if u.Port() != "" || strings.HasSuffix(u.Host, ":") {
		return "", "", fmt.Errorf("invalid bucket URL %q: a bucket name has no port", raw)
	}
	if err := checkName(u.Host); err != nil {
		return "", "", fmt.Errorf("invalid bucket URL %q: %w", raw, err)
	}
	if prefix, err = urlPrefix(u); err != nil {
		return "", "", fmt.Errorf("invalid bucket URL %q: %w", raw, err)
	}
	return u.Host, prefix, nil
}

// urlPrefix returns the object name prefix of a URL's path.
func urlPrefix(u *url.URL) (string, error) {
	prefix := strings.TrimPrefix(u.Path, "/")
	if prefix == "" {
		return "", nil
	}
	if strings.ContainsFunc(prefix, unicode.IsControl) {
		return "", errors.New("the prefix has a control character")
	}
	for seg := range strings.SplitSeq(strings.TrimSuffix(prefix, "/"), "/") {
		if seg == "" || seg == "." || seg == ".." {
			return "", errors.New(`the prefix must not have empty, "." or ".." segments`)
		}
	}
	return strings.TrimSuffix(prefix, "/") + "/", nil
}
