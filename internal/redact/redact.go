// Package redact keeps the server's own paths out of the errors Grove
// shows its callers. A model that fails to load fails with its runtime's
// reason, and that reason names the file it read: a path in the server's
// model cache (/var/cache/grove/models/pctr-1234/model.onnx), or in the
// directory of a file:// bucket. Callers (the status document, the OIP
// repository index, the management API, a registration's answer) see the
// same reason with each such path replaced by the name the caller knows
// (pctr/model.onnx, "the bucket"); the server log keeps the full text.
//
// The engine builds the Paths of a model where it knows them (where it
// fetches or loads the model) and passes its errors through Paths.Error
// before they leave for a caller. The *Error it returns answers callers
// with the redacted message, still wraps the original (errors.Is and
// errors.As see through it, so the kind of failure is kept), and logs
// as the original (it is a slog.LogValuer). The package has no state.
package redact

import (
	"log/slog"
	"slices"
	"strings"
)

// Path is one server path and the name callers see in its place.
type Path struct {
	// Local is an absolute directory, or a URL that names one
	// (file:///srv/models). It is replaced where it is a whole path
	// prefix: where the character after it ends a path component (a
	// slash, a space, a quote, the end of the text; not a letter, digit,
	// '.', '_', '-', '~' or '+' that would make it a longer name).
	Local string
	// Public replaces Local. When it is empty, a slash right after Local
	// goes too: "/cache/m-1/model.onnx" with Local "/cache/m-1" becomes
	// "model.onnx".
	Public string
}

// Paths are the server paths to take out of a message. The longest Local
// is replaced first where two start at the same place.
type Paths []Path

// With returns p with the given local path shown as public, unless local is
// empty or "/" (which would name every path).
func (p Paths) With(local, public string) Paths {
	local = strings.TrimSuffix(local, "/")
	if local == "" {
		return p
	}
	return append(slices.Clip(p), Path{Local: local, Public: public})
}

// String returns s with every Local of p replaced by its Public.
func (p Paths) String(s string) string {
	if len(p) == 0 {
		return s
	}
	byLength := slices.Clone(p)
	slices.SortStableFunc(byLength, func(a, b Path) int { return len(b.Local) - len(a.Local) })
	var out strings.Builder
	i, copied := 0, 0
	for i < len(s) {
		matched := false
		for _, r := range byLength {
			if !strings.HasPrefix(s[i:], r.Local) {
				continue
			}
			end := i + len(r.Local)
			if end < len(s) && nameByte(s[end]) {
				continue // a longer name that starts like r.Local
			}
			out.WriteString(s[copied:i])
			out.WriteString(r.Public)
			if r.Public == "" && end < len(s) && s[end] == '/' {
				end++
			}
			i, copied, matched = end, end, true
			break
		}
		if !matched {
			i++
		}
	}
	if copied == 0 {
		return s
	}
	out.WriteString(s[copied:])
	return out.String()
}

// nameByte reports whether c may continue a file name (so that a Local
// followed by c is only the start of a longer name).
func nameByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("._-~+", c) >= 0
}

// Error returns err as callers see it: an *Error whose message is err's
// with p's paths replaced, wrapping err, and logged as err's full message.
// It returns err itself when it is nil or names none of p's paths.
func (p Paths) Error(err error) error {
	if err == nil {
		return nil
	}
	full := Full(err)
	msg := p.String(err.Error())
	if msg == err.Error() {
		return err
	}
	return &Error{msg: msg, full: full, err: err}
}

// Error is an error whose message has the server's paths taken out (see
// Paths.Error). It wraps the original error, and a log line shows the
// original's full message.
type Error struct {
	msg  string // redacted
	full string // as the server log shows it
	err  error
}

// Error returns the message with the server's paths replaced.
func (e *Error) Error() string { return e.msg }

// Unwrap returns the original error.
func (e *Error) Unwrap() error { return e.err }

// LogValue is the original's full message: log/slog's handlers log it in
// place of the redacted one.
func (e *Error) LogValue() slog.Value { return slog.StringValue(e.full) }

// Full returns err's message as the server log shows it: for an *Error
// (err itself, not one it wraps), the original's full message.
func Full(err error) string {
	if err == nil {
		return ""
	}
	if e, ok := err.(*Error); ok {
		return e.full
	}
	return err.Error()
}
