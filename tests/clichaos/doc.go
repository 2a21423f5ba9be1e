// Package clichaos holds the command line's chaos test, TestCLIChaos:
// many leaderrun instances on one name, killed, stopped and stolen from at
// random, while their COMMANDs check that no two ever run at once. The
// test binary plays leaderrun itself (through a link named leaderrun, as
// cmd.Main), COMMAND and its grandchildren; see tests/README.md for the
// soak commands.
package clichaos
