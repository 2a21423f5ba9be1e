package cmd

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/leaderrun/leaderrun/internal/layout"
	"github.com/urfave/cli/v3"
)

func lockfileCommand() *cli.Command {
	return &cli.Command{
		Name:      "lockfile",
		Usage:     "print the path of NAME's lock file, for flock(1) and other programs",
		ArgsUsage: "NAME",
		Description: `Prints DIR/NAME.lock, the file whose flock(2) is NAME's leadership, in
the lock directory leaderrun would use (--dir, LEADERRUN_DIR or the
default, which it creates). flock(1) on it excludes leaderrun and the other
way round. The file itself is created by the first leaderrun of NAME.

EXAMPLES:
   flock "$(leaderrun lockfile backup)" -c /usr/local/bin/backup.sh`,
		Flags:         []cli.Flag{subDirFlag()},
		Action:        lockfileAction,
		ShellComplete: completeNames,
	}
}

func lockfileAction(ctx context.Context, c *cli.Command) error {
	if c.NArg() != 1 {
		return usageErrorf("leaderrun lockfile: give exactly one NAME, as in leaderrun lockfile backup")
	}
	s, err := begin(ctx, c, "lockfile", c.Args().First(), true)
	if err != nil {
		return err
	}
	defer s.close()
	if !s.lk.flock() {
		return usageErrorf("leaderrun lockfile: this leaderrun elects over another backend than flock(2) (etcd), where %s has no lock file that flock(1) could share; run flock(1) jobs under leaderrun instead", s.name)
	}
	dir, err := filepath.Abs(s.dir)
	if err != nil {
		dir = s.dir
	}
	fmt.Println(layout.LockPath(dir, s.name))
	return nil
}
