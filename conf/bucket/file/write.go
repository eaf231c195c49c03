package file

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/groveml/grove/conf/bucket"
)

// WriteObject replaces the named object's content with data if the object
// is at version ifVersion ("": if it does not exist); see bucket.Writer.
//
// Writers are serialised by an exclusive flock(2) on a lock file next to
// the object (".<base name>.lock" in the object's directory, created on
// first use and left there), held while the current content is read and
// its version compared, the new content is written to a temporary file in
// the same directory and synced, and the temporary file is renamed over
// the object. Readers never see a partial object. Other processes that
// write with WriteObject, on the same host or sharing the directory through
// a file system with working flock, are serialised too; editing the file by
// hand is not, as with any lock, but a hand edit does change the version,
// so a writer that read the content before it gets a conflict.
//
// Missing parent directories are created. The object must not be a
// symlink (WriteObject would replace the link, not its target). The
// directory is synced after the rename on a best-effort basis.
func (b *Bucket) WriteObject(ctx context.Context, name string, data []byte, ifVersion string) (bucket.Attrs, error) {
	if !fs.ValidPath(name) || name == "." {
		return bucket.Attrs{}, fmt.Errorf("writing to %s: invalid object name %q", b, name)
	}
	if err := ctx.Err(); err != nil {
		return bucket.Attrs{}, err
	}
	dir, base := path.Split(name)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	} else if err := b.root.MkdirAll(dir, 0o755); err != nil {
		return bucket.Attrs{}, fmt.Errorf("writing %s to %s: %w", name, b, err)
	}
	unlock, err := lockFile(ctx, b.root, path.Join(dir, "."+base+".lock"))
	if err != nil {
		return bucket.Attrs{}, fmt.Errorf("writing %s to %s: locking: %w", name, b, err)
	}
	defer unlock()

	cur, curVersion, err := b.current(name)
	if err != nil {
		return bucket.Attrs{}, fmt.Errorf("writing %s to %s: %w", name, b, err)
	}
	switch {
	case ifVersion == "" && cur != nil:
		return bucket.Attrs{}, fmt.Errorf("writing %s to %s: %w: it exists (version %s), the write required it not to", name, b, bucket.ErrConflict, curVersion)
	case ifVersion != "" && cur == nil:
		return bucket.Attrs{}, fmt.Errorf("writing %s to %s: %w: it does not exist, the write required version %s", name, b, bucket.ErrConflict, ifVersion)
	case ifVersion != "" && curVersion != ifVersion:
		return bucket.Attrs{}, fmt.Errorf("writing %s to %s: %w: version is %s, the write required %s", name, b, bucket.ErrConflict, curVersion, ifVersion)
	}

	var suffix [8]byte
	rand.Read(suffix[:])
	tmp := path.Join(dir, "."+base+".tmp-"+hex.EncodeToString(suffix[:]))
	perm := fs.FileMode(0o644)
	if cur != nil {
		perm = cur.Mode().Perm()
	}
	fi, err := b.writeTemp(tmp, data, perm)
	if err != nil {
		b.root.Remove(tmp)
		return bucket.Attrs{}, fmt.Errorf("writing %s to %s: %w", name, b, err)
	}
	if err := b.root.Rename(tmp, name); err != nil {
		b.root.Remove(tmp)
		return bucket.Attrs{}, fmt.Errorf("writing %s to %s: %w", name, b, err)
	}
	// The object is written: from here on nothing may fail, or a caller
	// retrying would apply its change twice.
	if d, err := b.root.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return attrs(data, fi), nil
}

// current returns the info and version of the object's current file, or a
// nil info if there is none. It does not follow a symlink: the object is
// replaced by a rename, which would replace the link itself.
func (b *Bucket) current(name string) (fs.FileInfo, string, error) {
	fi, err := b.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, "", nil
	case err != nil:
		return nil, "", err
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, "", errors.New("the object is a symlink")
	case !fi.Mode().IsRegular():
		return nil, "", errors.New("not a regular file")
	}
	f, err := b.root.Open(name)
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	h := sha256.New() // version's hash, without holding the content
	if _, err := io.Copy(h, f); err != nil {
		return nil, "", err
	}
	return fi, hex.EncodeToString(h.Sum(nil)), nil
}

// writeTemp creates the file tmp with data, syncs it and returns its info.
func (b *Bucket) writeTemp(tmp string, data []byte, perm fs.FileMode) (fs.FileInfo, error) {
	f, err := b.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		return nil, err
	}
	if err := f.Chmod(perm); err != nil { // the umask may have cut it
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return fi, f.Close()
}
