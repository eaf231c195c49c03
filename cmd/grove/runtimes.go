package main

import (
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/torch"
)

// runtimes lists the model runtimes of this build; build tags may add more.
func runtimes() servables.Registry {
	return append(servables.Registry{torch.Runtime{}}, extraRuntimes()...)
}
