package supervise

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// DefaultSearchPath is where COMMAND is looked up when PATH is not set at
// all (env -i, a bare exec): glibc's confstr(_CS_PATH) with /usr/local/bin
// in front, the path execvp(3), env(1), flock(1) and timeout(1) search then.
// An empty PATH is a PATH: it is searched as it is (nothing is found).
const DefaultSearchPath = "/usr/local/bin:/bin:/usr/bin"

// LookPath is exec.LookPath, on DefaultSearchPath when PATH is unset.
//
// A name without a slash that was found before, with PATH as it is now,
// is the program found then for as long as that one is still there and
// executable: the supervisor looks COMMAND up once to report a missing
// program before it queues, and again at the grant, where one stat costs
// less than a walk of PATH (eleven stats on a common PATH) on the way to
// COMMAND. A program put earlier on PATH meanwhile is not seen.
func LookPath(name string) (string, error) {
	if strings.Contains(name, "/") {
		return exec.LookPath(name)
	}
	pathEnv, set := os.LookupEnv("PATH")
	if p, ok := found.recall(name, pathEnv, set); ok {
		if _, err := exec.LookPath(p); err == nil {
			return p, nil
		}
	}
	p, err := lookPath(name, set)
	if err == nil {
		found.remember(name, pathEnv, set, p)
	}
	return p, err
}

func lookPath(name string, pathSet bool) (string, error) {
	if pathSet {
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

// found is the last program LookPath found by a search of PATH.
var found lastFound

type lastFound struct {
	mu              sync.Mutex
	name, env, path string
	set             bool // PATH was set
}

func (f *lastFound) recall(name, env string, set bool) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.path, f.path != "" && f.name == name && f.env == env && f.set == set
}

func (f *lastFound) remember(name, env string, set bool, path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.name, f.env, f.set, f.path = name, env, set, path
}
