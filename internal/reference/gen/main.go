// Command gen packs a reference project into the txtar archive internal/reference
// embeds (see its go:generate lines): gen -o postgres.txtar ../../operator.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/labctl/labctl/internal/reference/archive"
)

func main() {
	out := flag.String("o", "", "the archive to write")
	flag.Parse()
	if *out == "" || flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: gen -o ARCHIVE.txtar PROJECT_DIR")
		os.Exit(2)
	}
	if err := archive.WriteFile(*out, flag.Arg(0)); err != nil {
		fmt.Fprintf(os.Stderr, "gen: %s: %v\n", flag.Arg(0), err)
		os.Exit(1)
	}
}
