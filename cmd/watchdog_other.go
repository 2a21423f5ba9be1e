//go:build !linux

package cmd

import "time"

// Without Pdeathsig and /proc there is nothing for a watchdog to add.

type watchdog struct{}

func startWatchdog(*term) *watchdog                    { return nil }
func (wd *watchdog) command(*termRecord)               {}
func (wd *watchdog) deadline(time.Time, time.Duration) {}
func (wd *watchdog) say(string)                        {}
func (wd *watchdog) close()                            {}
func (a *App) runLateRole() (int, bool)                { return 0, false }
