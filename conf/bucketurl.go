package conf

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// BucketURL is a parsed bucket URL.
type BucketURL struct {
	// Scheme is "file" or "gs".
	Scheme string
	// Dir is a file bucket's root directory; it is relative (to the working
	// directory) for file://./ URLs.
	Dir string
	// Bucket is a gs bucket's name.
	Bucket string
	// Prefix is the object name prefix of a gs bucket: empty or ending in "/".
	Prefix string
}

// String returns the URL in normal form.
func (u BucketURL) String() string {
	dir := filepath.ToSlash(u.Dir)
	switch {
	case u.Scheme == "gs":
		return "gs://" + u.Bucket + "/" + u.Prefix
	case dir == ".":
		return "file://./"
	case !filepath.IsAbs(u.Dir):
		return "file://./" + dir
	}
	return "file://" + dir
}

// ParseBucketURL parses a bucket URL: file:///abs/dir, file://./rel/dir
// (relative to the working directory) or gs://bucket[/prefix]. A gs prefix
// is a directory: "gs://b/models" holds the object "models/x" as "x".
func ParseBucketURL(raw string) (BucketURL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return BucketURL{}, fmt.Errorf("invalid bucket URL %q: %w", raw, err)
	}
	if u.Opaque != "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return BucketURL{}, fmt.Errorf("invalid bucket URL %q: want file:///abs/dir, file://./rel/dir or gs://bucket[/prefix]", raw)
	}
	switch u.Scheme {
	case "file":
		var dir string
		switch u.Host {
		case "", "localhost":
			if u.Path == "" {
				return BucketURL{}, fmt.Errorf("invalid bucket URL %q: no directory", raw)
			}
			dir = u.Path
		case ".":
			dir = "." + u.Path
		default:
			return BucketURL{}, fmt.Errorf("invalid bucket URL %q: a file URL names an absolute directory (file:///dir) or one relative to the working directory (file://./dir), not host %q", raw, u.Host)
		}
		return BucketURL{Scheme: "file", Dir: filepath.Clean(filepath.FromSlash(dir))}, nil
	case "gs":
		if err := validateBucketName(u.Host); err != nil {
			return BucketURL{}, fmt.Errorf("invalid bucket URL %q: %w", raw, err)
		}
		prefix := strings.TrimPrefix(u.Path, "/")
		for seg := range strings.SplitSeq(strings.TrimSuffix(prefix, "/"), "/") {
			if prefix != "" && (seg == "" || seg == "." || seg == "..") {
				return BucketURL{}, fmt.Errorf("invalid bucket URL %q: the prefix must not have empty, \".\" or \"..\" segments", raw)
			}
		}
		if prefix != "" && !strings.HasSuffix(prefix, "/") {
			prefix += "/"
		}
		return BucketURL{Scheme: "gs", Bucket: u.Host, Prefix: prefix}, nil
	case "":
		return BucketURL{}, fmt.Errorf("invalid bucket URL %q: no scheme; want file:// or gs://", raw)
	}
	return BucketURL{}, fmt.Errorf("invalid bucket URL %q: unsupported scheme %q; want file or gs", raw, u.Scheme)
}

// validateBucketName checks the characters allowed in GCS bucket names.
func validateBucketName(name string) error {
	if name == "" {
		return errors.New("no bucket name")
	}
	for _, r := range name {
		if !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("bucket name %q may only contain lowercase letters, digits, '-', '_' and '.'", name)
		}
	}
	return nil
}
