//go:build !linux

package cmd

// Elsewhere COMMAND does not get the terminal: it runs in a background
// process group, as it always did.

func foregroundTTY() (int, bool)   { return -1, false }
func restoreForeground(int)        {}
func watchStops(*child)            {}
func (c *child) suspend()          {}
func watchHangup() <-chan struct{} { return nil }
