#!/usr/bin/env bash
# Two toolgate builds side by side: both serve the same scripted upstream and are measured in
# alternating rounds (A B, B A, ...), so load from whoever else shares the machine falls on both
# alike. Prints each round's hop CPU µs/req (the process's user+system time over the run divided
# by the requests it served) and req/s, then each build's mean. For reading one change's effect;
# `bench/hop-cpu.sh` reads a build against the bare hyper hop, `loadbench` is the run of record.
#
#   bench/ab-cpu.sh OLD/toolgate NEW/toolgate [ROUNDS=6] [SECONDS=5] [plain|guard] [request.json|request-history.json|request-agent-turns-50k.json|request-agent-turns-200k.json] [BIN_DIR=target/release]
#
# BIN_DIR holds bench-upstream (`cargo build --release -p toolgate-bench --bins`).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

a=$1 b=$2 rounds=${3:-6} seconds=${4:-5} mode=${5:-plain} request=${6:-request.json}
bin_dir=${7:-target/release}
plugins=""
if [ "$mode" = guard ]; then plugins=$GUARD_PLUGINS; fi

bench_setup "$bin_dir"
start_toolgate A "$a" "$plugins"
pid_a=$toolgate_pid address_a=$toolgate_address
start_toolgate B "$b" "$plugins"
pid_b=$toolgate_pid address_b=$toolgate_address

measure() { # LABEL ADDRESS PID
  echo "$1 $(hop_cpu "$2" "$3" "$work/$request" "$seconds")"
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $mode, $request; A = $a, B = $b"
for round in $(seq "$rounds"); do
  if ((round % 2)); then
    measure A "$address_a" "$pid_a"; measure B "$address_b" "$pid_b"
  else
    measure B "$address_b" "$pid_b"; measure A "$address_a" "$pid_a"
  fi
done | tee "$work/rounds"
awk '{sum[$1] += $2; n[$1]++; all[$1] = all[$1] " " $2}
     END {for (k in sum) printf "%s: mean %.2f hop CPU µs/req (rounds:%s)\n", k, sum[k] / n[k], all[k]}' \
  "$work/rounds" | sort
