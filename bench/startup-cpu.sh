#!/usr/bin/env bash
# bench/startup-cpu.sh [ROUNDS [PER]]: the processor time one start-up
# costs, where the wall clock of the report's start-up part cannot say it:
# `leaderrun --dir D --name x -- true`, the same with its term's watchdog
# switched off (TEST_LEADERRUN_FENCE=nowatchdog, a test switch that gives up
# a guarantee), `gofloor D/f true` (bench/gofloor) and `flock D/f true`.
# Each runs PER times (20) in a cgroup v2 of its own, whose cpu.stat
# usage_usec counts every process of it, the watchdog too; ROUNDS rounds (10),
# the four interleaved; it prints each one's rounds, sorted, in µs of CPU a
# start-up. Needs a cgroup v2 this user may make cgroups in (root, or a
# delegated one), and flock(1).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-10} per=${2:-20}

mnt=$(awk '$9 == "cgroup2" { print $5; exit }' /proc/self/mountinfo)
own=$(sed -n 's/^0:://p' /proc/self/cgroup)
base="$mnt$own"
if [ -z "$mnt" ] || [ ! -w "$base" ]; then
  echo "startup-cpu.sh: no cgroup v2 to make cgroups in (${base:-none mounted}): run it as root, or in a delegated cgroup" >&2
  exit 1
fi
command -v flock >/dev/null || { echo "startup-cpu.sh: flock(1) not installed (Debian: util-linux)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/leaderrun" .
go build -o "$tmp/gofloor" ./bench/gofloor
mkdir -m 700 "$tmp/locks"
touch "$tmp/locks/f"

run() {
  case $1 in
    leaderrun) "$tmp/leaderrun" --dir "$tmp/locks" --name x -- true ;;
    nowatchdog) TEST_LEADERRUN_FENCE=nowatchdog "$tmp/leaderrun" --dir "$tmp/locks" --name x -- true ;;
    gofloor) "$tmp/gofloor" "$tmp/locks/f" true ;;
    flock) flock "$tmp/locks/f" true ;;
  esac
}

declare -A got
for r in $(seq "$rounds"); do
  for tool in leaderrun nowatchdog gofloor flock; do
    cg="$base/startup-cpu-$$-$r-$tool"
    mkdir "$cg"
    (echo "$BASHPID" > "$cg/cgroup.procs"; for _ in $(seq "$per"); do run "$tool"; done)
    # A watchdog may still be exiting: its time counts once it is gone.
    for _ in $(seq 100); do grep -q '^populated 0' "$cg/cgroup.events" && break; sleep 0.01; done
    got[$tool]+=" $(( $(awk '/^usage_usec/ { print $2 }' "$cg/cpu.stat") / per ))"
    rmdir "$cg"
  done
done
for tool in leaderrun nowatchdog gofloor flock; do
  printf '%-11s %s\n' "$tool" "$(tr ' ' '\n' <<<"${got[$tool]}" | sed '/^$/d' | sort -n | tr '\n' ' ')"
done
