package supervise

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// DefaultSearchPath is where COMMAND is looked up when PATH is not set at
// all (env -i, a bare exec): glibc's confstr(_CS_PATH) with /usr/local/bin
// in front, the path execvp(3), env(1), flock(1) and timeout(1) search then.
// An empty PATH is a PATH: it is searched as it is (nothing is found).
const DefaultSearchPath = "/usr/local/bin:/bin:/usr/bin"

// LookPath is exec.LookPath, on DefaultSearchPath when PATH is unset.
func LookPath(name string) (string, error) {
	if _, set := os.LookupEnv("PATH"); set || strings.Contains(name, "/") {
		return exec.LookPath(name)
	}
	var denied error
	for _, dir := range filepath.SplitList(DefaultSearchPath) {
		path, err := exec.LookPath(filepath.Join(dir, name))
		if err == nil {
			return path, nil
		}
		if denied == nil && errors.Is(err, fs.ErrPermission) {
			denied = &exec.Error{Name: name, Err: fs.ErrPermission}
		}
	}
	if denied != nil {
		return "", denied
	}
	return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
}
