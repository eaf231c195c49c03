package main

import (
	"fmt"
	"io"

	"github.com/groveml/grove/conf/bucket"
)

// checksum prints the model checksum of each path: the SHA-256 of the
// per-file SHA-256 hex digests ordered by path, as in the model config. A
// directory's root CHECKSUM file (bucket.ChecksumFile) is left out, so the
// output is what to write into it.
func checksum(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: grove checksum PATH [PATH...]")
		return 2
	}
	code := 0
	for _, p := range args {
		sum, err := bucket.ChecksumPath(p)
		if err != nil {
			fmt.Fprintf(stderr, "grove checksum: %v\n", err)
			code = 1
			continue
		}
		if len(args) == 1 {
			fmt.Fprintln(stdout, sum)
		} else {
			fmt.Fprintf(stdout, "%s  %s\n", sum, p)
		}
	}
	return code
}
