#!/usr/bin/env bash
# A quick side-by-side of the hop's own CPU per request, for iterating on the hot path between
# two full `loadbench` runs: the scripted upstream, the bare hyper hop (plain, and with the least
# guard: row g) and toolgate (no plugins, and tool_selection) from one build, the benchmark's 10-tool request with and without 50 KB
# of history, and with 50 KB and 200 KB of agent turns (rows h50t … d200t, not run by default), driven by wrk. Prints hop CPU µs/req (the process's user+system time over the
# run divided by the requests it served) and req/s, in interleaved rounds. Not the benchmark of
# record (that is `loadbench`, with oha, nginx and the dist build); a check of a change's
# direction on whatever build is at hand.
#
#   cargo build --release -p toolgate -p toolgate-bench --bins
#   bench/hop-cpu.sh [BIN_DIR=target/release] [SECONDS=6] [ROUNDS=2] [TARGETS="h g c d c50 d50"]
#
# TARGETS picks the rows; a process no row uses is not started.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

bin_dir=${1:-target/release}
seconds=${2:-6}
rounds=${3:-2}
targets=" ${4:-h g c d c50 d50} "
wants() { [[ $targets == *" $1 "* ]]; }

bench_setup "$bin_dir"
"$bin_dir/hyper-hop" --upstream "$upstream" >"$work/hop.out" 2>&1 &
pids+=($!)
hop_pid=$!
hop=$(listen_of "$work/hop.out")
if wants g; then
  "$bin_dir/hyper-hop" --upstream "$upstream" --guard >"$work/least-guard.out" 2>&1 &
  pids+=($!)
  least_guard_pid=$!
  least_guard=$(listen_of "$work/least-guard.out")
fi
if wants c || wants c50 || wants c50t || wants c200t; then
  start_toolgate plain "$bin_dir/toolgate" ""
  plain_pid=$toolgate_pid plain=$toolgate_address
fi
if wants d || wants d50 || wants d50t || wants d200t; then
  start_toolgate guard "$bin_dir/toolgate" "$GUARD_PLUGINS"
  guard_pid=$toolgate_pid guard=$toolgate_address
fi

measure() { # LABEL ADDRESS PID BODY
  read -r cpu rate < <(hop_cpu "$2" "$3" "$4" "$seconds")
  printf '%-34s %9s req/s  %6.1f hop CPU µs/req\n' "$1" "$rate" "$cpu"
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; binaries: $bin_dir"
for round in $(seq "$rounds"); do
  echo "round $round"
  if wants h; then measure "(h) bare hyper hop" "$hop" "$hop_pid" "$work/request.json"; fi
  if wants g; then
    measure "(g) bare hyper hop, least guard" "$least_guard" "$least_guard_pid" "$work/request.json"
  fi
  if wants c; then measure "(c) toolgate, no plugins" "$plain" "$plain_pid" "$work/request.json"; fi
  if wants d; then measure "(d) toolgate, tool_selection" "$guard" "$guard_pid" "$work/request.json"; fi
  if wants c50; then
    measure "(c50) no plugins, +50 KB history" "$plain" "$plain_pid" "$work/request-history.json"
  fi
  if wants d50; then
    measure "(d50) tool_selection, +50 KB history" "$guard" "$guard_pid" "$work/request-history.json"
  fi
  for size in 50 200; do
    agent=$work/request-agent-turns-${size}k.json
    if wants "h${size}t"; then measure "(h${size}t) bare hop, +$size KB agent turns" "$hop" "$hop_pid" "$agent"; fi
    if wants "c${size}t"; then measure "(c${size}t) no plugins, +$size KB agent turns" "$plain" "$plain_pid" "$agent"; fi
    if wants "d${size}t"; then measure "(d${size}t) tool_selection, +$size KB agent turns" "$guard" "$guard_pid" "$agent"; fi
  done
done
