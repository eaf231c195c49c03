package redact

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"testing"
)

func TestStringReplacesWholePathPrefixesOnly(t *testing.T) {
	p := Paths{}.
		With("/var/cache/grove/models/pctr-1234", "ads/pctr/1").
		With("/var/cache/grove", "<cache_dir>").
		With("file:///srv/models", "the bucket").
		With("/srv/models", "the bucket").
		With("/srv/models/", "") // trailing slash trimmed: a second, shorter rule for the same Local never wins
	for _, c := range []struct{ in, want string }{
		{"onnx: loading /var/cache/grove/models/pctr-1234/model.onnx: Load model from /var/cache/grove/models/pctr-1234/model.onnx failed",
			"onnx: loading ads/pctr/1/model.onnx: Load model from ads/pctr/1/model.onnx failed"},
		{"mkdir /var/cache/grove/models/pctr-*: permission denied", "mkdir <cache_dir>/models/pctr-*: permission denied"},
		{`no objects found under model path "missing/" in file:///srv/models`, `no objects found under model path "missing/" in the bucket`},
		{"open /srv/models: permission denied", "open the bucket: permission denied"},
		// Longer names that merely start like a Local are someone else's.
		{"open /srv/models2/x and /var/cache/grove-old/y", "open /srv/models2/x and /var/cache/grove-old/y"},
		{"'/srv/models'", "'the bucket'"},
		{"nothing to hide", "nothing to hide"},
		{"", ""},
	} {
		if got := p.String(c.in); got != c.want {
			t.Errorf("String(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

func TestStringWithEmptyPublicDropsTheSlash(t *testing.T) {
	p := Paths{}.With("/cache/m-1", "")
	if got, want := p.String("loading /cache/m-1/model.pt: bad; dir /cache/m-1"), "loading model.pt: bad; dir "; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestWithIgnoresTheRoot(t *testing.T) {
	if p := (Paths{}).With("", "x").With("/", "x"); len(p) != 0 {
		t.Errorf("With of the root or nothing added %v", p)
	}
}

func TestErrorRedactsTheMessageAndKeepsTheChainAndTheLog(t *testing.T) {
	orig := fmt.Errorf("loading model pctr/: %w", &fs.PathError{Op: "open", Path: "/cache/m-1/model.pt", Err: fs.ErrPermission})
	err := Paths{}.With("/cache/m-1", "pctr").Error(orig)
	if got, want := err.Error(), "loading model pctr/: open pctr/model.pt: permission denied"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, fs.ErrPermission) {
		t.Error("the redacted error does not wrap the original's sentinel")
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) || pe.Path != "/cache/m-1/model.pt" {
		t.Errorf("errors.As found %v", pe)
	}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Error("load failed", "err", err)
	if !strings.Contains(buf.String(), "/cache/m-1/model.pt") {
		t.Errorf("the log line lost the full path: %s", buf.String())
	}
	if Full(err) != orig.Error() {
		t.Errorf("Full = %q, want %q", Full(err), orig.Error())
	}

	// Redacting again keeps the first original for the log.
	again := Paths{}.With("pctr", "x").Error(err)
	if Full(again) != orig.Error() || again.Error() != "loading model x/: open x/model.pt: permission denied" {
		t.Errorf("redacted twice: %q, full %q", again.Error(), Full(again))
	}
}

func TestErrorLeavesOtherErrorsAlone(t *testing.T) {
	p := Paths{}.With("/cache", "<cache_dir>")
	if p.Error(nil) != nil {
		t.Error("Error(nil) is not nil")
	}
	plain := errors.New("no path here")
	if p.Error(plain) != plain {
		t.Error("an error naming no path was wrapped")
	}
	if Full(nil) != "" || Full(plain) != "no path here" {
		t.Errorf("Full: %q %q", Full(nil), Full(plain))
	}
}
