//go:build !faultinject

package main

import "github.com/groveml/grove/servables"

func extraRuntimes() []servables.Runtime { return nil }
