// Package ui holds the web console's front end: its sources (src/, built
// with esbuild from the npm lockfile by `make ui`) and the built files in
// dist/, which it embeds so that `go build` needs no npm. The console's
// server side is package api/console.
package ui

import (
	"embed"
	"io/fs"
)

//go:embed dist
var dist embed.FS

// Assets returns the built console: index.html, app.js and style.css at
// its root.
func Assets() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // dist is embedded above: fs.Sub fails only for an invalid name
	}
	return sub
}
