#!/usr/bin/env bash
# A quick side-by-side of the hop's own CPU per request, for iterating on the hot path between
# two full `loadbench` runs: the scripted upstream, the bare hyper hop and toolgate (no plugins,
# and tool_selection) from one build, the benchmark's 10-tool request with and without 50 KB
# of history, driven by wrk. Prints hop CPU µs/req (the process's user+system time over the
# run divided by the requests it served) and req/s, in interleaved rounds. Not the benchmark of
# record (that is `loadbench`, with oha, nginx and the dist build); a check of a change's
# direction on whatever build is at hand.
#
#   cargo build --release -p toolgate -p toolgate-bench --bins
#   bench/hop-cpu.sh [BIN_DIR=target/release] [SECONDS=6] [ROUNDS=2]
set -euo pipefail
cd "$(dirname "$0")/.."

bin_dir=${1:-target/release}
seconds=${2:-6}
rounds=${3:-2}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }

work=$(mktemp -d)
pids=()
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

"$bin_dir/bench-upstream" --write-requests "$work" >/dev/null
"$bin_dir/bench-upstream" >"$work/upstream.out" 2>&1 &
pids+=($!)
listen_of() { for _ in $(seq 50); do grep -q LISTEN "$1" && break; sleep 0.1; done; awk '/LISTEN/ {print $2}' "$1"; }
upstream=$(listen_of "$work/upstream.out")
"$bin_dir/hyper-hop" --upstream "$upstream" >"$work/hop.out" 2>&1 &
pids+=($!)
hop_pid=$!
hop=$(listen_of "$work/hop.out")

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start_toolgate() { # NAME PLUGINS -> sets toolgate_pid, toolgate_address
  local port
  port=$(free_port)
  cat >"$work/$1.toml" <<EOF
[server]
listen = "127.0.0.1:$port"
admin_listen = "off"
[upstreams.bench]
url = "http://$upstream"
[audit]
output = "off"
$2
[[routes]]
path = "/v1"
upstream = "bench"
EOF
  TOOLGATE_LOG=warn "$bin_dir/toolgate" serve --config "$work/$1.toml" >"$work/$1.log" 2>&1 &
  toolgate_pid=$!
  toolgate_address=127.0.0.1:$port
  for _ in $(seq 50); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
}
start_toolgate plain ""
pids+=("$toolgate_pid")
plain_pid=$toolgate_pid plain=$toolgate_address
start_toolgate guard $'[[plugins]]\nname = "tool_selection"\nmode = "enforce"\n[plugins.settings]\nstrict = false'
pids+=("$toolgate_pid")
guard_pid=$toolgate_pid guard=$toolgate_address

cat >"$work/post.lua" <<'EOF'
local file = io.open(os.getenv("BODY"), "rb")
wrk.method = "POST"
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = "application/json"
EOF
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
measure() { # LABEL ADDRESS PID BODY
  BODY=$4 wrk -t1 -c32 -d2s -s "$work/post.lua" "http://$2/v1/chat/completions" >/dev/null
  local before after output requests
  before=$(cpu_ticks "$3")
  output=$(BODY=$4 wrk -t1 -c32 -d"${seconds}s" -s "$work/post.lua" "http://$2/v1/chat/completions")
  after=$(cpu_ticks "$3")
  requests=$(awk '/requests in/ {print $1}' <<<"$output")
  if grep -q "Non-2xx" <<<"$output"; then echo "$1: answers other than 2xx" >&2; exit 1; fi
  printf '%-34s %9s req/s  %6.1f hop CPU µs/req\n' "$1" "$(awk '/Requests\/sec/ {print $2}' <<<"$output")" \
    "$(awk -v t=$((after - before)) -v n="$requests" -v hz="$(getconf CLK_TCK)" 'BEGIN {print t * 1e6 / hz / n}')"
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; binaries: $bin_dir"
for round in $(seq "$rounds"); do
  echo "round $round"
  measure "(h) bare hyper hop" "$hop" "$hop_pid" "$work/request.json"
  measure "(c) toolgate, no plugins" "$plain" "$plain_pid" "$work/request.json"
  measure "(d) toolgate, tool_selection" "$guard" "$guard_pid" "$work/request.json"
  measure "(c50) no plugins, +50 KB history" "$plain" "$plain_pid" "$work/request-history.json"
  measure "(d50) tool_selection, +50 KB history" "$guard" "$guard_pid" "$work/request-history.json"
done
