package cmd

import (
	"strconv"
	"syscall"
	"testing"
)

// status --watch on a terminal keeps SINCE counting: the table is redrawn
// every second while nothing else changes, instead of showing the age
// the holder had when it first appeared for ever.
func TestStatusWatchSinceCounts(t *testing.T) {
	p, slave := newPty(t)
	startSession(t, slave, "sh", "-c", `"$LR" --name held -- sleep 30 & echo "holder $!"; exec "$LR" status held --watch`)
	holder, _ := strconv.Atoi(p.waitFor(`holder (\d+)`)[1])
	t.Cleanup(func() { syscall.Kill(holder, syscall.SIGKILL) })
	p.waitFor(`held +holder +exclusive .* running +\d+(\.\d)?s ago`)
	// The holder changes nothing after it leads: only the clock does.
	p.waitFor(`held +holder +exclusive .* running +[1-9]\d*(\.\d)?s ago`)
}
