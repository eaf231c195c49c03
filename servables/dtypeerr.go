package servables

import (
	"errors"
	"fmt"
	"strings"
)

// DTypeError is an error whose message names data types. Its Error text
// names them as DType.String does (the B&A names: FLOAT, DOUBLE, ...);
// a protocol with names of its own (OIP's FP32, FP64, ...) renders the
// same message with them (RenderDTypes). It wraps a sentinel, so KindOf
// classifies it.
type DTypeError struct {
	sentinel error
	format   string
	args     []any
}

// DTypeFormatter is an argument of a DTypeError that names data types
// itself, such as a list of a model's inputs.
type DTypeFormatter interface {
	FormatDTypes(name func(DType) string) string
}

// Errorf returns a DTypeError wrapping sentinel: its text is the
// sentinel's, ": ", and format with args, where a DType argument (%v or
// %s) is a data type's name and a DTypeFormatter argument names data types
// itself.
func Errorf(sentinel error, format string, args ...any) error {
	return &DTypeError{sentinel: sentinel, format: format, args: args}
}

// Error returns the message with DType.String's names.
func (e *DTypeError) Error() string { return e.Render(DType.String) }

// Unwrap returns the sentinel.
func (e *DTypeError) Unwrap() error { return e.sentinel }

// Render returns the message with the data types named by name.
func (e *DTypeError) Render(name func(DType) string) string {
	args := make([]any, len(e.args))
	for i, a := range e.args {
		switch v := a.(type) {
		case DType:
			args[i] = name(v)
		case DTypeFormatter:
			args[i] = v.FormatDTypes(name)
		default:
			args[i] = a
		}
	}
	return e.sentinel.Error() + ": " + fmt.Sprintf(e.format, args...)
}

// RenderDTypes returns err's text with the data types of the DTypeError
// it wraps, if any, named by name instead of DType.String.
func RenderDTypes(err error, name func(DType) string) string {
	msg := err.Error()
	var de *DTypeError
	if errors.As(err, &de) {
		msg = strings.Replace(msg, de.Error(), de.Render(name), 1)
	}
	return msg
}
