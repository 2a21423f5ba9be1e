package cmd

import "strings"

// EnvRow is one environment variable and what it does.
type EnvRow struct{ Name, Meaning string }

// Environment is the one list of the variables leaderrun reads and those
// COMMAND receives: `leaderrun --help` (ENVIRONMENT) and the manual's
// ENVIRONMENT section are made from it, with the variables of the
// programs it hands over to (Handover.Env).
var Environment = []EnvRow{
	{"LEADERRUN_DIR", "Read: the lock directory, as --dir (empty is unset). Set for COMMAND: the directory in use."},
	{"LEADERRUN_GROUP_SHARED", "Read: as --group-shared."},
	{"LEADERRUN_ALLOW_UNSAFE_FS", "Read: as --allow-unsafe-fs."},
	{"LEADERRUN_STEAL_STOPPED", "Read: as --steal-stopped."},
	{"LEADERRUN_LAZY_WATCHDOG", "Read: as --lazy-watchdog."},
	{"NOTIFY_SOCKET", "Read (Linux): systemd's notification socket (Type=notify): leaderrun sends READY=1 when it starts leading (at once with --notify-ready=start), STATUS= lines while it waits and leads, and STOPPING=1 when it stops. COMMAND does not get it, so that it cannot report readiness for leaderrun; see --notify-ready. With --single-instance leaderrun sends nothing and the primary's COMMAND gets it."},
	{"LEADERRUN_NAME", "Set for COMMAND: the lock name."},
	{"LEADERRUN_EPOCH", "Set for COMMAND: the fencing token, greater for every new leader; pass it to what the job writes, and have that refuse lower epochs."},
	{"LEADERRUN_PID", "Set for COMMAND: the pid of its leaderrun."},
	{"LEADERRUN_TERM", "Set for COMMAND: a random id of this term, by which the orphan fence finds what the term left running; keep it in the environment of what COMMAND starts."},
	{"LEADERRUN_INVOCATIONS_FD", "Set for COMMAND with --single-instance: the descriptor (3) on which later instances' invocations arrive, one JSON object a line (see SINGLE INSTANCE)."},
	{"LEADERRUN_REPLIES_FD", "Set for COMMAND with --single-instance: the descriptor (4) on which COMMAND answers them."},
}

// envHelp is the app's environment as listed in `leaderrun --help`.
func (a *App) envHelp() string {
	var b strings.Builder
	b.WriteString("ENVIRONMENT:\n")
	for _, r := range a.environment() {
		b.WriteString(wrapRow(r.Name, r.Meaning, 26))
	}
	return b.String()
}

// wrapRow is one row of a --help table: tag in a column of width w (or on
// its own line when longer), the text wrapped at 78 columns after it.
func wrapRow(tag, text string, w int) string {
	var b strings.Builder
	line := "   " + tag
	if len(line) >= w {
		b.WriteString(line + "\n")
		line = ""
	}
	line += strings.Repeat(" ", w-len(line))
	fresh := true
	for _, word := range strings.Fields(text) {
		if !fresh && len(line)+1+len(word) > 78 {
			b.WriteString(line + "\n")
			line, fresh = strings.Repeat(" ", w), true
		}
		if !fresh {
			line += " "
		}
		line += word
		fresh = false
	}
	b.WriteString(line + "\n")
	return b.String()
}
