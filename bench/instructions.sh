#!/usr/bin/env bash
# Instructions per request in user space, counted by valgrind's callgrind: the bare hyper hop
# (plain, and with the least guard) and toolgate (no plugins, tool_selection) from one build, each serving the benchmark's
# 10-tool chat request (or BODY) from a fixed number of requests after a warm-up. Unlike a CPU
# time, the count does not move with whoever else shares the machine, so it reads a change of
# a few hundred instructions that the CPU scripts cannot tell from noise; it does not see the
# kernel, waits or cache misses, which `loadbench` and `ab-cpu.sh` do. Needs valgrind and oha.
#
#   cargo build --release -p toolgate -p toolgate-bench --bins
#   bench/instructions.sh [BIN_DIR=target/release] [REQUESTS=4000] [request.json|request-history.json]
#   KEEP=DIR bench/instructions.sh ...   # also keeps each row's counts as DIR/LABEL.callgrind
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

bin_dir=${1:-target/release}
requests=${2:-4000}
request=${3:-request.json}
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind; }
command -v oha >/dev/null || cargo install oha --locked

bench_setup "$bin_dir"

post() { # ADDRESS COUNT
  local summary
  summary=$(oha -n "$2" -c 8 --no-tui -m POST -H 'content-type: application/json' \
    -D "$work/$request" "http://$1/v1/chat/completions")
  grep -qE 'Success rate:[[:space:]]+100' <<<"$summary" ||
    { echo "$1: not every request succeeded" >&2; exit 1; }
}

# count LABEL EXTRA: starts the process under callgrind (EXTRA: the hop's arguments, or
# toolgate's plugin table), warms it, zeroes the counts, serves
# $requests requests, and divides the instructions counted by them.
count() {
  local label=$1 port out pid total
  port=$(free_port)
  out="$work/$label.callgrind"
  if [ "$label" = hop ] || [ "$label" = least-guard ]; then
    valgrind --tool=callgrind --callgrind-out-file="$out" \
      "$bin_dir/hyper-hop" --upstream "$upstream" --listen "127.0.0.1:$port" $2 >/dev/null 2>&1 &
  else
    write_config_for "$bin_dir/toolgate" "$label" "$port" "$2"
    TOOLGATE_LOG=warn valgrind --tool=callgrind --callgrind-out-file="$out" \
      "$bin_dir/toolgate" serve --config "$work/$label.toml" >/dev/null 2>&1 &
  fi
  pid=$!
  pids+=("$pid")
  for _ in $(seq 300); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.2; done
  post "127.0.0.1:$port" 500
  callgrind_control -z "$pid" >/dev/null 2>&1
  post "127.0.0.1:$port" "$requests"
  callgrind_control -d "$pid" >/dev/null 2>&1
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  # KEEP=DIR keeps the counts for callgrind_annotate (the work directory goes at the end).
  if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$out.1" "$KEEP/$label.callgrind"; fi
  total=$(callgrind_annotate "$out.1" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
  awk -v total="$total" -v n="$requests" -v label="$label" \
    'BEGIN {printf "%-8s %8.0f instructions per request\n", label, total / n}'
}

echo "$request, $requests requests after 500 to warm up"
count hop ""
count least-guard --guard
count plain ""
count guard "$GUARD_PLUGINS"
