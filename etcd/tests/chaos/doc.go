// Package chaos holds leaderrun-etcd's chaos test, TestEtcdChaos: wrappers
// on three simulated hosts contend for one name over a 3-member etcd while
// wrappers are SIGKILLed, SIGSTOPped and continued, and etcd members are
// killed and restarted or stopped and continued, and hosts are cut off in
// network namespaces the test makes; the COMMANDs check that
// no two ever run at once. The test binary plays leaderrun-etcd (through a
// link of that name), its watchdog, and COMMAND. See tests/README.md for
// the soak command.
package chaos
