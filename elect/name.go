package elect

import "fmt"

// MaxNameLen is the longest lock name, in bytes. It keeps every derived
// path, the bus socket's included, well inside system limits.
const MaxNameLen = 64

// ValidateName reports whether name can name a lock: 1 to MaxNameLen bytes
// of [A-Za-z0-9._@+=,:-], not starting with '.' or '-'. Nothing is created
// for an invalid name.
func ValidateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: the name is empty; give a name such as \"backup\"", ErrInvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %q is %d bytes long; the limit is %d", ErrInvalidName, name, len(name), MaxNameLen)
	case name[0] == '.' || name[0] == '-':
		return fmt.Errorf("%w: %q starts with %q; start with a letter or digit", ErrInvalidName, name, name[0])
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !nameByte(c) {
			return fmt.Errorf("%w: %q has %q at byte %d; use only letters, digits and . _ @ + = , : -", ErrInvalidName, name, c, i)
		}
	}
	return nil
}

func nameByte(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	switch c {
	case '.', '_', '@', '+', '=', ',', ':', '-':
		return true
	}
	return false
}
