// Package layers holds the test that keeps Grove's import graph layered
// as docs/architecture.md draws it: each package imports only packages of
// its own layer or of layers below, but for the few arrows the test names.
// It has no code of its own.
package layers
