// Package file is the bucket driver of file:// URLs: a directory on the
// local disk, written with a lock and an atomic rename.
package file

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unicode"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/conf/bucket"
)

// Driver returns the driver of file:// URLs.
func Driver() bucket.Driver {
	return bucket.Driver{Scheme: "file", Open: func(_ context.Context, rawURL string) (bucket.Bucket, error) {
		return Open(rawURL)
	}}
}

// ParseURL returns the directory a file:// URL names: file:///abs/dir (or
// file://localhost/abs/dir), or file://./rel/dir, relative to the working
// directory, which it returns relative. The directory is cleaned.
func ParseURL(raw string) (string, error) {
	u, err := conf.ParseBucketURL(raw)
	if err != nil {
		return "", err
	}
	if u.Scheme != "file" {
		return "", fmt.Errorf("invalid bucket URL %q: the scheme is not file", raw)
	}
	var dir string
	switch u.Host {
	case "", "localhost":
		if u.Path == "" {
			return "", fmt.Errorf("invalid bucket URL %q: no directory", raw)
		}
		dir = u.Path
	case ".":
		dir = "." + u.Path
	default:
		return "", fmt.Errorf("invalid bucket URL %q: a file URL names an absolute directory (file:///dir) or one relative to the working directory (file://./dir), not host %q", raw, u.Host)
	}
	if strings.ContainsFunc(dir, unicode.IsControl) {
		return "", fmt.Errorf("invalid bucket URL %q: the directory has a control character", raw)
	}
	return filepath.Clean(filepath.FromSlash(dir)), nil
}

// Bucket is a bucket backed by a local directory. An object's version is
// the SHA-256 of its content (see WriteObject).
type Bucket struct {
	bucket.Turns
	root *os.Root // confines every access to the directory, symlinks included
	dir  string   // absolute
}

// Open opens the file:// bucket at rawURL. Its directory must exist;
// relative directories are resolved against the working directory now.
// Symlinks inside it are followed as long as they stay inside it; symlinks
// that point outside it, and absolute symlinks, make reads fail.
func Open(rawURL string) (*Bucket, error) {
	dir, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("opening bucket directory %s: %w", dir, err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("opening bucket directory: %w", err)
	}
	return &Bucket{root: root, dir: abs}, nil
}

// String returns the bucket's URL, with its absolute directory.
func (b *Bucket) String() string { return "file://" + filepath.ToSlash(b.dir) }

// LocalDir returns the bucket's absolute directory (see bucket.LocalDir).
func (b *Bucket) LocalDir() string { return b.dir }

// Close releases the directory.
func (b *Bucket) Close() error { return b.root.Close() }

// ReadObject returns the named object's content and attributes.
func (b *Bucket) ReadObject(ctx context.Context, name string, limit int64) ([]byte, bucket.Attrs, error) {
	f, fi, err := b.open(ctx, name)
	if err != nil {
		return nil, bucket.Attrs{}, err
	}
	defer f.Close()
	data, err := bucket.ReadAll(f, b, name, limit)
	if err != nil {
		return nil, bucket.Attrs{}, err
	}
	return data, attrs(data, fi), nil
}

// Open returns a reader of the named object.
func (b *Bucket) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	f, _, err := b.open(ctx, name)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// open opens a regular file; directories and other non-regular files do not exist as objects.
func (b *Bucket) open(ctx context.Context, name string) (*os.File, fs.FileInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if err := validName(name); err != nil {
		return nil, nil, err
	}
	f, err := b.root.Open(name)
	if err != nil {
		return nil, nil, b.pathError(name, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, b.pathError(name, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s in %s (not a regular file)", bucket.ErrNotExist, name, b)
	}
	return f, fi, nil
}

// List returns the files whose names start with prefix, sorted. Symlinks to files and directories inside the
// root are listed under the link's name; a symlink that leaves the root is
// an error if its name matches prefix.
func (b *Bucket) List(ctx context.Context, prefix string) ([]bucket.Object, error) {
	start := "."
	if i := strings.LastIndexByte(prefix, '/'); i > 0 {
		start = prefix[:i]
		if !fs.ValidPath(start) {
			return nil, fmt.Errorf("listing %s: invalid prefix %q", b, prefix)
		}
	}
	var out []bucket.Object
	info, err := b.root.Stat(start)
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || err == nil && !info.IsDir():
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("listing %s: %w", b, err)
	}
	if err := b.walk(ctx, start, prefix, []fs.FileInfo{info}, &out); err != nil {
		return nil, fmt.Errorf("listing %q in %s: %w", prefix, b, err)
	}
	slices.SortFunc(out, func(x, y bucket.Object) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// walk appends to out the files under dir whose names start with prefix.
// stack holds the directories being walked, to detect symlink cycles.
func (b *Bucket) walk(ctx context.Context, dir, prefix string, stack []fs.FileInfo, out *[]bucket.Object) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	entries, err := fs.ReadDir(b.root.FS(), dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if dir != "." {
			name = dir + "/" + name
		}
		if !strings.HasPrefix(name, prefix) && !strings.HasPrefix(prefix, name+"/") {
			continue // neither matches nor leads to a match
		}
		var fi fs.FileInfo
		if e.Type()&fs.ModeSymlink != 0 {
			fi, err = b.root.Stat(name) // follows the link, failing if it leaves the root
		} else {
			fi, err = e.Info()
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue // a dangling symlink, or removed since ReadDir
		}
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			if slices.ContainsFunc(stack, func(a fs.FileInfo) bool { return os.SameFile(a, fi) }) {
				return fmt.Errorf("%s: symlink cycle", name)
			}
			if err := b.walk(ctx, name, prefix, append(stack, fi), out); err != nil {
				return err
			}
		case fi.Mode().IsRegular() && strings.HasPrefix(name, prefix):
			*out = append(*out, bucket.Object{Name: name, Size: fi.Size()})
		}
	}
	return nil
}

// pathError wraps an error from the root, mapping missing files to bucket.ErrNotExist.
func (b *Bucket) pathError(name string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%w: %s in %s", bucket.ErrNotExist, name, b)
	}
	return fmt.Errorf("object %s in %s: %w", name, b, err)
}

// validName accepts slash-separated relative names without ".", ".." or
// empty segments; a name ending in "/" (a GCS directory placeholder) does
// not exist in a file bucket.
func validName(name string) error {
	if strings.HasSuffix(name, "/") && fs.ValidPath(strings.TrimSuffix(name, "/")) {
		return fmt.Errorf("%w: %s (names ending in \"/\" are directories)", bucket.ErrNotExist, name)
	}
	if !fs.ValidPath(name) || name == "." {
		return fmt.Errorf("invalid object name %q", name)
	}
	return nil
}

// attrs returns the attributes of the version of a file that holds data.
func attrs(data []byte, fi fs.FileInfo) bucket.Attrs {
	return bucket.Attrs{Version: version(data), ModTime: fi.ModTime(), Size: int64(len(data))}
}

// version is the version of an object holding data: the lowercase hex
// SHA-256 of the content. Unlike a modification time, it changes with any
// change of content, whatever the clock or the file system's timestamp
// granularity, and whoever made the change (another process, a hand edit
// that kept the size and the time). Writing back the same content keeps
// the version, which is harmless: a write conditional on a version is
// conditional on the content the writer read.
func version(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
