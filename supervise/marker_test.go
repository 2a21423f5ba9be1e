package supervise

import (
	"fmt"
	"strings"
	"testing"
)

// The record written without fmt reads as it did with it, and back.
func TestRecordText(t *testing.T) {
	for _, r := range []termRecord{
		{id: strings.Repeat("ab", termIDLen/2), wpid: 1, wstart: 0},
		{id: strings.Repeat("0f", termIDLen/2), wpid: 4194304, wstart: 18446744073709551615, pidns: 4026531836, cgroup: "/sys/fs/cgroup/user.slice/leaderrun-x"},
		{id: strings.Repeat("12", termIDLen/2), wpid: 77, wstart: 123, cpid: 78, cstart: 124, pgid: 78, commandStarted: true},
	} {
		var b strings.Builder
		fmt.Fprintf(&b, "%s\nid %s\nwrapper %d %d\n", termHeader, r.id, r.wpid, r.wstart)
		if r.pidns != 0 {
			fmt.Fprintf(&b, "pidns %d\n", r.pidns)
		}
		if r.cgroup != "" {
			fmt.Fprintf(&b, "cgroup %s\n", r.cgroup)
		}
		if r.commandStarted {
			fmt.Fprintf(&b, "command %d %d %d\n", r.cpid, r.cstart, r.pgid)
		}
		b.WriteString(".\n")
		if got := r.String(); got != b.String() {
			t.Errorf("got %q, want %q", got, b.String())
		}
		back, err := parseTermRecord([]byte(r.String()))
		if err != nil || *back != r {
			t.Errorf("%q read back as %+v, %v; want %+v", r.String(), back, err, r)
		}
	}
}
