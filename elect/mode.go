package elect

import "fmt"

// Mode is how a lock is held, as in the Web Locks API.
type Mode int

const (
	// Exclusive: one holder at a time. The default.
	Exclusive Mode = iota
	// Shared: any number of shared holders at once; consecutive shared
	// requests in the queue are granted together, and a shared request
	// queued behind an exclusive one waits for it.
	Shared
)

func (m Mode) String() string {
	if m == Shared {
		return "shared"
	}
	return "exclusive"
}

// ParseMode parses "exclusive" or "shared".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "exclusive", "":
		return Exclusive, nil
	case "shared":
		return Shared, nil
	}
	return Exclusive, fmt.Errorf("%w: mode %q; use exclusive or shared", ErrInvalidRequest, s)
}

// MarshalText encodes the mode as "exclusive" or "shared".
func (m Mode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText decodes "exclusive" or "shared".
func (m *Mode) UnmarshalText(b []byte) error {
	v, err := ParseMode(string(b))
	*m = v
	return err
}
