// Command mangen writes the leaderrun(1) manual page from the command
// definitions (package cmd) to docs/leaderrun.1, or to the file -o names:
//
//	go generate ./...     # from the repository root (see main.go)
//	go run ./internal/man/mangen -o docs/leaderrun.1 -readme docs/command.md
//
// With -readme it also rewrites the exit status and flock(1)
// migration tables.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/internal/handovers"
	"github.com/leaderrun/leaderrun/internal/man"
)

func main() {
	out := flag.String("o", "docs/leaderrun.1", "output `FILE`")
	readme := flag.String("readme", "", "also rewrite the generated tables (exit status, flock(1) migration) of the Markdown `FILE` (docs/command.md)")
	flag.Parse()
	if *readme != "" {
		b, err := os.ReadFile(*readme)
		if err != nil {
			fmt.Fprintln(os.Stderr, "mangen:", err)
			os.Exit(1)
		}
		s, ok := man.SpliceReadme(string(b))
		if !ok {
			fmt.Fprintf(os.Stderr, "mangen: %s lacks the exit-codes or flock-migration markers\n", *readme)
			os.Exit(1)
		}
		if err := os.WriteFile(*readme, []byte(s), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "mangen:", err)
			os.Exit(1)
		}
	}
	var b bytes.Buffer
	if err := man.Write(&b, cmd.ManualOf(handovers.Options()...)); err != nil {
		fmt.Fprintln(os.Stderr, "mangen:", err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, b.Bytes(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "mangen:", err)
		os.Exit(1)
	}
}
