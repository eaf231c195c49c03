// Command grove serves the models listed in a bucket's model config over
// HTTP, following the config as it changes.
//
//	grove serve --config grove.yaml [flags]   serve models
//	grove checksum PATH                       print a model's checksum
//	grove logs tail [flags]                   print the prediction log as JSON lines
//	grove replay [flags]                      score logged requests again and compare
//	grove version                             print the version
package main

import (
	"fmt"
	"io"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(args[1:], stderr)
	case "evaluate":
		return evaluateCmd(args[1:], stderr)
	case "checksum":
		return checksum(args[1:], stdout, stderr)
	case "logs":
		return logs(args[1:], stdout, stderr)
	case "replay":
		return replay(args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintln(stdout, "grove", version)
		return 0
	case "help", "-h", "--help":
		usage(stdout)
		return 0
	}
	fmt.Fprintf(stderr, "grove: unknown command %q\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprint(w, `usage: grove <command> [flags]

commands:
  serve      serve the models listed in a bucket's model config (grove serve -h for flags)
  evaluate   join the outcomes to the logged predictions and publish each release's quality
             (grove evaluate -h; grove serve --evaluate runs it in-process)
  checksum   print the checksum of a model directory or file, as the model config expects it
             (a directory's root CHECKSUM file is left out)
  logs tail  print the prediction log's events from Kafka as JSON lines (grove logs tail -h)
  replay     score logged requests again with another model and compare the answers (grove replay -h)
  version    print the version
`)
}
