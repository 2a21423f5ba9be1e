//go:build unix

package backendtest

import "github.com/leaderrun/leaderrun/cmd"

// FlagValues is a cmd.FlagValue over m, with the defaults of flags for
// what m leaves out: a backend's parse, tested without a command line.
func FlagValues(flags []cmd.BackendFlag, m map[string]string) cmd.FlagValue {
	return func(name string) string {
		if v, ok := m[name]; ok {
			return v
		}
		for _, f := range flags {
			if f.Name == name {
				return f.Value
			}
		}
		return ""
	}
}
