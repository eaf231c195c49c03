package bucket

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"
)

// WriteObject implements Writer.
//
// Writers are serialised by an exclusive flock(2) on a lock file next to
// the object (".<base name>.lock" in the object's directory, created on
// first use and left there), held while the current generation is read and
// compared, the new content is written to a temporary file in the same
// directory and synced, and the temporary file is renamed over the object.
// Readers never see a partial object. Other processes that write with
// WriteObject, on the same host or sharing the directory through a file
// system with working flock, are serialised too; editing the file by hand
// is not, as with any lock.
//
// The new version's modification time is set to the current time, or to
// just after the previous version's if the clock has not moved past it (same
// tick, or the clock went back), and checked to be stored later than the
// previous one, so every write gets a new generation even when the content
// has the same size. Missing parent directories are created. The object
// must not be a symlink (WriteObject would replace the link, not its
// target). The directory is synced after the rename on a best-effort basis.
func (b *fileBucket) WriteObject(ctx context.Context, name string, data []byte, ifGeneration int64) (Attrs, error) {
	if ifGeneration < 0 {
		return Attrs{}, fmt.Errorf("writing %s to %s: negative generation %d", name, b, ifGeneration)
	}
	if !fs.ValidPath(name) || name == "." {
		return Attrs{}, fmt.Errorf("writing to %s: invalid object name %q", b, name)
	}
	if err := ctx.Err(); err != nil {
		return Attrs{}, err
	}
	dir, base := path.Split(name)
	dir = strings.TrimSuffix(dir, "/")
	if dir == "" {
		dir = "."
	} else if err := b.root.MkdirAll(dir, 0o755); err != nil {
		return Attrs{}, fmt.Errorf("writing %s to %s: %w", name, b, err)
	}
	unlock, err := lockFile(ctx, b.root, path.Join(dir, "."+base+".lock"))
	if err != nil {
		return Attrs{}, fmt.Errorf("writing %s to %s: locking: %w", name, b, err)
	}
	defer unlock()

	// Lstat, not Stat: the object is replaced by a rename, which would
	// replace a symlink itself.
	cur, err := b.root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		cur = nil
	case err != nil:
		return Attrs{}, fmt.Errorf("writing %s to %s: %w", name, b, err)
	case cur.Mode()&fs.ModeSymlink != 0:
		return Attrs{}, fmt.Errorf("writing %s to %s: the object is a symlink", name, b)
	case !cur.Mode().IsRegular():
		return Attrs{}, fmt.Errorf("writing %s to %s: not a regular file", name, b)
	}
	switch {
	case ifGeneration == 0 && cur != nil:
		return Attrs{}, fmt.Errorf("writing %s to %s: %w: it exists (generation %d), the write required it not to", name, b, ErrConflict, fileGeneration(cur))
	case ifGeneration > 0 && cur == nil:
		return Attrs{}, fmt.Errorf("writing %s to %s: %w: it does not exist, the write required generation %d", name, b, ErrConflict, ifGeneration)
	case ifGeneration > 0 && fileGeneration(cur) != ifGeneration:
		return Attrs{}, fmt.Errorf("writing %s to %s: %w: generation is %d, the write required %d", name, b, ErrConflict, fileGeneration(cur), ifGeneration)
	}

	var suffix [8]byte
	rand.Read(suffix[:])
	tmp := path.Join(dir, "."+base+".tmp-"+hex.EncodeToString(suffix[:]))
	perm := fs.FileMode(0o644)
	if cur != nil {
		perm = cur.Mode().Perm()
	}
	fi, err := b.writeTemp(tmp, data, perm, cur)
	if err != nil {
		b.root.Remove(tmp)
		return Attrs{}, fmt.Errorf("writing %s to %s: %w", name, b, err)
	}
	if err := b.root.Rename(tmp, name); err != nil {
		b.root.Remove(tmp)
		return Attrs{}, fmt.Errorf("writing %s to %s: %w", name, b, err)
	}
	// The object is written: from here on nothing may fail, or a caller
	// retrying would apply its change twice.
	if d, err := b.root.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return Attrs{Generation: fileGeneration(fi), ModTime: fi.ModTime(), Size: fi.Size()}, nil
}

// writeTemp creates the file tmp with data, gives it a modification time
// later than prev's (if prev is not nil), syncs it and returns its info.
func (b *fileBucket) writeTemp(tmp string, data []byte, perm fs.FileMode, prev fs.FileInfo) (fs.FileInfo, error) {
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
	fi, err := b.bumpModTime(f, tmp, prev)
	if err != nil {
		return nil, err
	}
	if err := f.Sync(); err != nil {
		return nil, err
	}
	return fi, f.Close()
}

// bumpModTime sets the modification time of f (named tmp) to now, or later
// than prev's if now is not, and makes sure the file system stored a time
// later than prev's whatever its timestamp granularity.
func (b *fileBucket) bumpModTime(f *os.File, tmp string, prev fs.FileInfo) (fs.FileInfo, error) {
	now := time.Now()
	if prev == nil {
		if err := b.root.Chtimes(tmp, time.Time{}, now); err != nil {
			return nil, err
		}
		return f.Stat()
	}
	last := prev.ModTime()
	mtime := now
	// The steps cover nanosecond to two-second (FAT) timestamp granularity.
	for _, step := range []time.Duration{0, time.Nanosecond, time.Microsecond, time.Millisecond, 10 * time.Millisecond, time.Second, 2 * time.Second} {
		if step > 0 {
			mtime = last.Add(step)
		}
		if !mtime.After(last) {
			continue
		}
		if err := b.root.Chtimes(tmp, time.Time{}, mtime); err != nil {
			return nil, err
		}
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		if fi.ModTime().After(last) {
			return fi, nil
		}
	}
	return nil, fmt.Errorf("cannot store a modification time later than %v", last)
}
