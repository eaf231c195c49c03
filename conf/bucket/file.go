package bucket

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/groveml/grove/conf"
)

// fileBucket is a bucket backed by a local directory.
type fileBucket struct {
	root  *os.Root // confines every access to the directory, symlinks included
	loc   conf.BucketURL
	turns turns
}

func (b *fileBucket) updateTurns() *turns { return &b.turns }

func openFile(dir string) (*fileBucket, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("opening bucket directory %s: %w", dir, err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("opening bucket directory: %w", err)
	}
	return &fileBucket{root: root, loc: conf.BucketURL{Scheme: "file", Dir: abs}}, nil
}

func (b *fileBucket) String() string { return b.loc.String() }

// Close releases the directory.
func (b *fileBucket) Close() error { return b.root.Close() }

// ReadObject implements Bucket.
func (b *fileBucket) ReadObject(ctx context.Context, name string) ([]byte, Attrs, error) {
	f, fi, err := b.open(ctx, name)
	if err != nil {
		return nil, Attrs{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, Attrs{}, fmt.Errorf("reading %s from %s: %w", name, b, err)
	}
	return data, Attrs{Generation: fileGeneration(fi), ModTime: fi.ModTime(), Size: fi.Size()}, nil
}

// Open implements Bucket.
func (b *fileBucket) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	f, _, err := b.open(ctx, name)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// open opens a regular file; directories and other non-regular files do not exist as objects.
func (b *fileBucket) open(ctx context.Context, name string) (*os.File, fs.FileInfo, error) {
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
		return nil, nil, fmt.Errorf("%w: %s in %s (not a regular file)", ErrNotExist, name, b)
	}
	return f, fi, nil
}

// List implements Bucket. Symlinks to files and directories inside the
// root are listed under the link's name; a symlink that leaves the root is
// an error if its name matches prefix.
func (b *fileBucket) List(ctx context.Context, prefix string) ([]Object, error) {
	start := "."
	if i := strings.LastIndexByte(prefix, '/'); i > 0 {
		start = prefix[:i]
		if !fs.ValidPath(start) {
			return nil, fmt.Errorf("listing %s: invalid prefix %q", b, prefix)
		}
	}
	var out []Object
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
	slices.SortFunc(out, func(x, y Object) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// walk appends to out the files under dir whose names start with prefix.
// stack holds the directories being walked, to detect symlink cycles.
func (b *fileBucket) walk(ctx context.Context, dir, prefix string, stack []fs.FileInfo, out *[]Object) error {
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
			*out = append(*out, Object{Name: name, Size: fi.Size()})
		}
	}
	return nil
}

// pathError wraps an error from the root, mapping missing files to ErrNotExist.
func (b *fileBucket) pathError(name string, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%w: %s in %s", ErrNotExist, name, b)
	}
	return fmt.Errorf("object %s in %s: %w", name, b, err)
}

// validName accepts slash-separated relative names without ".", ".." or
// empty segments; a name ending in "/" (a GCS directory placeholder) does
// not exist in a file bucket.
func validName(name string) error {
	if strings.HasSuffix(name, "/") && fs.ValidPath(strings.TrimSuffix(name, "/")) {
		return fmt.Errorf("%w: %s (names ending in \"/\" are directories)", ErrNotExist, name)
	}
	if !fs.ValidPath(name) || name == "." {
		return fmt.Errorf("invalid object name %q", name)
	}
	return nil
}

// fileGeneration derives a generation number from a file's modification time and size.
func fileGeneration(fi fs.FileInfo) int64 {
	h := fnv.New64a()
	var buf [16]byte
	binary.LittleEndian.PutUint64(buf[:8], uint64(fi.ModTime().UnixNano()))
	binary.LittleEndian.PutUint64(buf[8:], uint64(fi.Size()))
	h.Write(buf[:])
	// Positive, like GCS generations: 0 means "does not exist" to WriteObject.
	return max(int64(h.Sum64()>>1), 1)
}
