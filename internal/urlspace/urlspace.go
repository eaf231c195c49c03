// Package urlspace names the first URL path segments that Grove's own
// HTTP APIs own: /api/ (DeepRec's POST /api/predict/{model}), /ui/, /v1/
// (B&A, status, management), /v2/ (the Open Inference Protocol) and
// /debug/ (pprof). The HTTP server routes a path under one of them only to
// the routes and mounts registered under it, never to ForestFlow's
// /{org}/{project}/{n}/... patterns (package transport/httpserver), and the model
// config refuses a contract organisation of one of these names (package
// conf/modelconfig), whose contract could never be reached. The package
// has no state.
package urlspace

import (
	"slices"
	"strings"
)

// reserved are the segments, sorted.
var reserved = [...]string{"api", "debug", "ui", "v1", "v2"}

// Reserved returns the reserved first segments, sorted.
func Reserved() []string { return slices.Clone(reserved[:]) }

// IsReserved reports whether segment is a reserved first segment.
func IsReserved(segment string) bool { return slices.Contains(reserved[:], segment) }

// ReservedPath reports whether path (starting with "/") is under a
// reserved segment: "/v1", "/v1/" and "/v1/models" are; "/v10/a" is not.
func ReservedPath(path string) bool {
	first, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return IsReserved(first)
}
