package bucket

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
)

// fileSum is one file's lowercase hex SHA-256, under the name that orders it.
type fileSum struct {
	name string
	sum  string
}

// combine computes a model checksum from its files' checksums: sort by
// name (byte order), concatenate the hex strings, and return the lowercase
// hex SHA-256 of the result. It sorts sums in place.
func combine(sums []fileSum) (string, error) {
	if len(sums) == 0 {
		return "", errors.New("no files to checksum")
	}
	slices.SortFunc(sums, func(a, b fileSum) int { return strings.Compare(a.name, b.name) })
	h := sha256.New()
	for _, s := range sums {
		io.WriteString(h, s.sum)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Checksum returns the model checksum of files, which maps object paths
// to contents. The paths only order the files. It is an error for files to be empty.
func Checksum(files map[string][]byte) (string, error) {
	sums := make([]fileSum, 0, len(files))
	for name, data := range files {
		sum := sha256.Sum256(data)
		sums = append(sums, fileSum{name, hex.EncodeToString(sum[:])})
	}
	return combine(sums)
}

// ChecksumPath returns the model checksum of a local directory (all the
// regular files under it, recursively) or of a single file. It equals the
// output of
//
//	find <path> -type f -exec sha256sum {} \; | sort -k 2 | awk '{print $1}' | tr -d '\n' | sha256sum
//
// run with LC_ALL=C, except that a ChecksumFile at the directory's root
// is left out, as Fetch leaves it out. As with find, symlinks inside a
// directory are not followed, but path itself may be a symlink. A
// directory with no regular files is an error: the spec defines no
// checksum for an empty model.
func ChecksumPath(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		sum, err := fileSHA256(path)
		if err != nil {
			return "", err
		}
		return combine([]fileSum{{path, sum}})
	}
	dir, err := filepath.EvalSymlinks(path) // WalkDir would not enter a symlinked root
	if err != nil {
		return "", err
	}
	var sums []fileSum
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || p == filepath.Join(dir, ChecksumFile) {
			return err
		}
		sum, err := fileSHA256(p)
		if err != nil {
			return err
		}
		sums = append(sums, fileSum{filepath.ToSlash(p), sum})
		return nil
	})
	if err != nil {
		return "", err
	}
	if len(sums) == 0 {
		return "", fmt.Errorf("checksum of %s: no regular files under it", path)
	}
	return combine(sums)
}

// fileSHA256 returns the lowercase hex SHA-256 of a file's content.
func fileSHA256(path string) (string, error) { return readSHA256(context.Background(), path) }
