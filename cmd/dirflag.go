package cmd

import (
	"context"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v3"
)

// Limits of a path that the kernel accepts (Linux's PATH_MAX and NAME_MAX;
// the BSDs' are no larger).
const (
	maxPath     = 4095
	maxPathElem = 255
)

// checkDirFlags refuses a --dir given empty (--dir= would otherwise mean
// the default directory, which the user did not ask for) or too long for
// any filesystem, with a usage error, before anything opens it. It is the
// Before hook of the app and of every subcommand: each parses its own
// --dir. An empty LEADERRUN_DIR is unset, as the shell idiom
// LEADERRUN_DIR= means.
func checkDirFlags(ctx context.Context, c *cli.Command) (context.Context, error) {
	for _, cc := range c.Lineage() {
		if !slices.Contains(cc.LocalFlagNames(), "dir") {
			continue
		}
		dir := cc.String("dir")
		if v, set := os.LookupEnv("LEADERRUN_DIR"); dir == "" && set && v == "" {
			// urfave/cli counts an empty LEADERRUN_DIR as the app's
			// --dir given; it means unset.
			continue
		}
		what := "--dir"
		if dir != "" && dir == os.Getenv("LEADERRUN_DIR") {
			what = "LEADERRUN_DIR" // the app's --dir reads it
		}
		if err := checkDirValue(what, dir); err != nil {
			return ctx, err
		}
	}
	return ctx, checkDirValue("LEADERRUN_DIR", os.Getenv("LEADERRUN_DIR"))
}

// checkDirValue checks one lock directory path given by what (--dir or
// LEADERRUN_DIR); the empty LEADERRUN_DIR is not given.
func checkDirValue(what, dir string) error {
	if dir == "" {
		if what == "LEADERRUN_DIR" {
			return nil
		}
		return usageErrorf("leaderrun: --dir is empty; give a directory (mkdir -m 700 DIR; leaderrun --dir DIR ...), or leave --dir out for the private default")
	}
	if len(dir) > maxPath {
		return usageErrorf("leaderrun: %s is %d bytes long, more than a path may be (%d); give a shorter directory", what, len(dir), maxPath)
	}
	for _, elem := range strings.Split(dir, "/") {
		if len(elem) > maxPathElem {
			return usageErrorf("leaderrun: %s has an element of %d bytes (%.20s...), more than a file name may be (%d); give a shorter directory", what, len(elem), elem, maxPathElem)
		}
	}
	if strings.IndexByte(dir, 0) >= 0 {
		return usageErrorf("leaderrun: %s holds a NUL byte; give a directory path", what)
	}
	return nil
}
