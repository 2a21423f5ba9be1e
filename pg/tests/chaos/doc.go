// Package chaos holds leaderrun-pg's chaos test, TestPgChaos: wrappers on
// three simulated hosts contend for one name over one PostgreSQL while
// wrappers are SIGKILLed, SIGSTOPped and continued, sessions are ended
// with pg_terminate_backend, and the server is restarted at once or
// stopped past the TTL; the COMMANDs check, by a flock of their own that
// trusts nothing of leaderrun, that no two ever run at once.
package chaos
