//go:build faultinject

package main

import (
	"github.com/groveml/grove/servables"
	"github.com/groveml/grove/servables/faulty"
)

// extraRuntimes adds the fault-injection runtime used by the integration tests.
func extraRuntimes() []servables.Runtime { return []servables.Runtime{faulty.Runtime{}} }
