package elect

import "time"

// Snapshot is what Query saw at one moment, in the shape of the Web Locks
// navigator.locks.query(): granted requests and waiting ones, the latter in
// queue order. It describes the past by the time it is returned: show it,
// never decide on it.
type Snapshot struct {
	Held    []Holder  `json:"held"`
	Pending []Pending `json:"pending"`
}

// Holder is a granted request.
type Holder struct {
	Name    string    `json:"name"`
	Mode    Mode      `json:"mode"`
	PID     int       `json:"pid"`
	Epoch   uint64    `json:"epoch"`
	Since   time.Time `json:"since"`
	Command []string  `json:"command"`
	// State is "running", "stopped" (SIGSTOP or a debugger: it still
	// holds the lock), or "unknown" where the platform cannot tell.
	State string `json:"state"`
	// External is set for a holder that is not a leaderrun client, such
	// as flock(1) on the lock file; its Epoch is 0.
	External bool `json:"external,omitempty"`
}

// Pending is a queued request.
type Pending struct {
	Name    string    `json:"name"`
	Mode    Mode      `json:"mode"`
	PID     int       `json:"pid"`
	Ticket  uint64    `json:"ticket"`
	Since   time.Time `json:"since"`
	Command []string  `json:"command"`
	State   string    `json:"state"`
	// Steal is set for a stealing request, which goes ahead of the rest.
	Steal bool `json:"steal,omitempty"`
}
