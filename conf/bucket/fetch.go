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
	"path"
	"path/filepath"
	"strings"
)

// LocalModel is a model copied from a bucket into the local cache.
type LocalModel struct {
	// Dir is the directory holding the model's files; it is fresh for each fetch.
	Dir string
	// Files are the model's files, slash-separated, relative to Dir, sorted.
	// For a directory model they are the object names relative to the model
	// path; for a single-file model, the object's base name.
	Files []string
	// Checksum is the model checksum of the copied content.
	Checksum string
	// Size is the total size of the files in bytes.
	Size int64
	// Path is the model path it was fetched from (Fetch's modelPath).
	Path string
}

// Prefix is what stands for Dir in the bucket: the model path of a
// directory model ("ads/pctr/1/"), the directory of a single-object
// model's path ("ads/" for "ads/pctr.pt", "" at the bucket's root), so
// that Prefix followed by one of Files is the object's name.
func (m *LocalModel) Prefix() string {
	if strings.HasSuffix(m.Path, "/") {
		return m.Path
	}
	if d := path.Dir(m.Path); d != "." && d != "/" {
		return d + "/"
	}
	return ""
}

// Remove deletes the model's directory.
func (m *LocalModel) Remove() error { return os.RemoveAll(m.Dir) }

// FetchOption changes what Fetch does.
type FetchOption func(*fetchOptions)

type fetchOptions struct {
	checksumFile bool
}

// WithChecksumFile makes Fetch treat a ChecksumFile at a directory
// model's root as the model's declared checksum rather than as one of its
// files: it is left out of the model and its checksum, and the checksum
// must equal the one it holds. Grove uses it for the versions of a
// versioned entry; without it a model directory is fetched as B&A does,
// every file included.
func WithChecksumFile() FetchOption { return func(o *fetchOptions) { o.checksumFile = true } }

// Fetch copies the model at modelPath from b into a new directory under
// cacheDir and computes its checksum.
//
// A modelPath ending in "/" names every object under that prefix, except
// directory placeholders (names ending in "/") and, WithChecksumFile, a
// ChecksumFile at its root, which the model's checksum must then equal (a
// malformed file or a mismatch is an error naming it); any other
// modelPath names exactly one object. A model whose listed size is over
// maxBytes is rejected before anything is copied, and the limit is
// enforced again while copying; maxBytes <= 0 means no limit. Files are
// written to temporary names and renamed, and on error (or a panic of b)
// the new directory is removed.
func Fetch(ctx context.Context, b Bucket, modelPath, cacheDir string, maxBytes int64, opts ...FetchOption) (*LocalModel, error) {
	var fo fetchOptions
	for _, opt := range opts {
		opt(&fo)
	}
	objs, err := b.List(ctx, modelPath)
	if err != nil {
		return nil, fmt.Errorf("fetching model %s: %w", modelPath, err)
	}
	isDir := strings.HasSuffix(modelPath, "/")
	type file struct {
		name, rel string
	}
	var files []file
	var total int64
	nested := false   // objects under modelPath+"/" exist
	declared := false // a ChecksumFile is at the directory's root
	for _, o := range objs {
		var rel string
		switch {
		case fo.checksumFile && isDir && o.Name == modelPath+ChecksumFile:
			declared = true
			continue
		case isDir && !strings.HasSuffix(o.Name, "/"):
			rel = strings.TrimPrefix(o.Name, modelPath)
		case !isDir && o.Name == modelPath:
			rel = path.Base(o.Name)
		default:
			nested = nested || !isDir && strings.HasPrefix(o.Name, modelPath+"/")
			continue
		}
		if !fs.ValidPath(rel) {
			return nil, fmt.Errorf("fetching model %s: object %q cannot be stored as a local file", modelPath, o.Name)
		}
		files = append(files, file{o.Name, rel})
		total += o.Size
	}
	if len(files) == 0 {
		msg := fmt.Sprintf("no objects found under model path %q in %s", modelPath, b)
		if nested {
			msg += fmt.Sprintf("; it names a single object, to use the directory write %q", modelPath+"/")
		}
		return nil, errors.New(msg)
	}
	if maxBytes > 0 && total > maxBytes {
		return nil, fmt.Errorf("model %s is %d bytes, over the limit of %d bytes", modelPath, total, maxBytes)
	}
	var want string
	if declared {
		if want, err = readChecksumFile(ctx, b, modelPath+ChecksumFile); err != nil {
			return nil, fmt.Errorf("fetching model %s: %w", modelPath, err)
		}
	}

	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("fetching model %s: %w", modelPath, err)
	}
	dir, err := os.MkdirTemp(cacheDir, cacheName(modelPath)+"-")
	if err != nil {
		return nil, fmt.Errorf("fetching model %s: %w", modelPath, err)
	}
	m := &LocalModel{Dir: dir, Path: modelPath}
	// Whatever stops the copy, an error or a panic (a bug in a bucket
	// client), leaves no directory behind.
	done := false
	defer func() {
		if !done {
			os.RemoveAll(dir)
		}
	}()
	sums := make([]fileSum, 0, len(files))
	for _, f := range files {
		budget := int64(-1)
		if maxBytes > 0 {
			budget = maxBytes - m.Size
		}
		n, sum, err := copyObject(ctx, b, f.name, filepath.Join(dir, filepath.FromSlash(f.rel)), budget)
		if err != nil {
			if errors.Is(err, errTooLarge) {
				return nil, fmt.Errorf("model %s grew over the limit of %d bytes while downloading", modelPath, maxBytes)
			}
			return nil, fmt.Errorf("fetching model %s: %w", modelPath, err)
		}
		m.Size += n
		m.Files = append(m.Files, f.rel)
		sums = append(sums, fileSum{f.name, sum})
	}
	// Files are sorted: List returns names in order, and a common prefix
	// was removed from them (or there is only one).
	if m.Checksum, err = combine(sums); err != nil {
		return nil, err
	}
	if declared && m.Checksum != want {
		return nil, fmt.Errorf("model %s rejected: its files' checksum is %s, but %s holds %s", modelPath, m.Checksum, modelPath+ChecksumFile, want)
	}
	done = true
	return m, nil
}

// ChecksumFile is the name of the file at a model directory's root that
// may hold the model's checksum (64 lowercase hex characters; surrounding
// whitespace is ignored). It is not part of the model: not fetched, not
// in the checksum.
const ChecksumFile = "CHECKSUM"

// maxChecksumFile bounds what is read of a ChecksumFile.
const maxChecksumFile = 4 << 10

// readChecksumFile reads the checksum a ChecksumFile holds.
func readChecksumFile(ctx context.Context, b Bucket, name string) (string, error) {
	r, err := b.Open(ctx, name)
	if err != nil {
		return "", err
	}
	defer r.Close()
	data, err := io.ReadAll(io.LimitReader(ctxReader{ctx, r}, maxChecksumFile+1))
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", name, err)
	}
	return parseChecksumFile(name, data)
}

// parseChecksumFile reads the content of the ChecksumFile name.
func parseChecksumFile(name string, data []byte) (string, error) {
	sum := strings.TrimSpace(string(data))
	if len(data) > maxChecksumFile || len(sum) != 64 || strings.Trim(sum, "0123456789abcdef") != "" {
		shown := sum
		if len(shown) > 80 {
			shown = shown[:80] + "..."
		}
		return "", fmt.Errorf("%s does not hold a checksum (64 lowercase hex characters): %q", name, shown)
	}
	return sum, nil
}

// errTooLarge reports a copy that went over its byte budget.
var errTooLarge = errors.New("over the size limit")

// copyObject copies an object to dst through a temporary file, returning
// the size and lowercase hex SHA-256. budget < 0 means no size limit.
func copyObject(ctx context.Context, b Bucket, name, dst string, budget int64) (int64, string, error) {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, "", err
	}
	r, err := b.Open(ctx, name)
	if err != nil {
		return 0, "", err
	}
	defer r.Close()
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".grove-tmp-*")
	if err != nil {
		return 0, "", err
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed

	var src io.Reader = ctxReader{ctx, r}
	if budget >= 0 {
		src = io.LimitReader(src, budget+1)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), src)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	switch {
	case err != nil:
		return 0, "", fmt.Errorf("copying %s: %w", name, err)
	case budget >= 0 && n > budget:
		return 0, "", errTooLarge
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return 0, "", fmt.Errorf("storing %s: %w", name, err)
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// cacheName turns a model path into a readable directory name prefix.
func cacheName(modelPath string) string {
	name := []byte(strings.TrimSuffix(modelPath, "/"))
	for i, c := range name {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			name[i] = '_'
		}
	}
	if len(name) > 64 {
		name = name[len(name)-64:]
	}
	if len(name) == 0 || name[0] == '.' {
		name = append([]byte("m"), name...)
	}
	return string(name)
}

// Verify reports whether m's files in Dir still have the checksum Fetch
// gave them (files changed or removed on disk since are an error); it
// stops reading once ctx is done.
func (m *LocalModel) Verify(ctx context.Context) error {
	sums := make([]fileSum, 0, len(m.Files))
	for _, f := range m.Files {
		sum, err := readSHA256(ctx, filepath.Join(m.Dir, filepath.FromSlash(f)))
		if err != nil {
			return fmt.Errorf("verifying the files of model %s: %w", m.Path, err)
		}
		sums = append(sums, fileSum{f, sum})
	}
	got, err := combine(sums)
	if err != nil {
		return fmt.Errorf("verifying the files of model %s: %w", m.Path, err)
	}
	if got != m.Checksum {
		return fmt.Errorf("the files of model %s in %s changed on disk: their checksum is %s, fetched as %s", m.Path, m.Dir, got, m.Checksum)
	}
	return nil
}

// readSHA256 returns the lowercase hex SHA-256 of a file's content,
// reading it until ctx is done.
func readSHA256(ctx context.Context, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, ctxReader{ctx, f}); err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
