// Command labschema writes the JSON Schema of the lab format
// (labs/schema/lab.v1alpha1.json) from internal/labs' types and their doc
// comments. `make generate` runs it; a test in internal/labs fails when the
// file and the types differ.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/labctl/labctl/internal/labs"
)

func main() {
	src := flag.String("src", "internal/labs", "directory of the lab types' source")
	out := flag.String("o", "labs/schema/lab.v1alpha1.json", "file to write")
	flag.Parse()
	schema, err := labs.GenerateSchema(*src)
	if err == nil {
		err = os.WriteFile(*out, schema, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "labschema:", err)
		os.Exit(1)
	}
}
