#!/usr/bin/env bash
# Two toolgate builds side by side: both serve the same scripted upstream and are measured in
# alternating rounds (A B, B A, ...), so load from whoever else shares the machine falls on both
# alike. Prints each round's hop CPU µs/req (the process's user+system time over the run divided
# by the requests it served) and req/s, then each build's mean. For reading one change's effect;
# `bench/hop-cpu.sh` reads a build against the bare hyper hop, `loadbench` is the run of record.
#
#   bench/ab-cpu.sh OLD/toolgate NEW/toolgate [ROUNDS=6] [SECONDS=5] [plain|guard] [request.json|request-history.json] [BIN_DIR=target/release]
#
# BIN_DIR holds bench-upstream (`cargo build --release -p toolgate-bench --bins`).
set -euo pipefail
cd "$(dirname "$0")/.."

a=$1 b=$2 rounds=${3:-6} seconds=${4:-5} mode=${5:-plain} request=${6:-request.json}
bin_dir=${7:-target/release}
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
for _ in $(seq 50); do grep -q LISTEN "$work/upstream.out" && break; sleep 0.1; done
upstream=$(awk '/LISTEN/ {print $2}' "$work/upstream.out")

plugins=""
if [ "$mode" = guard ]; then
  plugins=$'[[plugins]]\nname = "tool_selection"\nmode = "enforce"\n[plugins.settings]\nstrict = false'
fi
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start() { # NAME BINARY -> sets port, pid
  port=$(free_port)
  cat >"$work/$1.toml" <<EOT
[server]
listen = "127.0.0.1:$port"
admin_listen = "off"
[upstreams.bench]
url = "http://$upstream"
[audit]
output = "off"
$plugins
[[routes]]
path = "/v1"
upstream = "bench"
EOT
  TOOLGATE_LOG=warn "$2" serve --config "$work/$1.toml" >"$work/$1.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  for _ in $(seq 50); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
}
start A "$a"; port_a=$port pid_a=$pid
start B "$b"; port_b=$port pid_b=$pid

cat >"$work/post.lua" <<'EOT'
local file = io.open(os.getenv("BODY"), "rb")
wrk.method = "POST"
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = "application/json"
EOT
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
measure() { # LABEL PORT PID
  BODY=$work/$request wrk -t1 -c32 -d1s -s "$work/post.lua" "http://127.0.0.1:$2/v1/chat/completions" >/dev/null
  local before after output
  before=$(cpu_ticks "$3")
  output=$(BODY=$work/$request wrk -t1 -c32 -d"${seconds}s" -s "$work/post.lua" "http://127.0.0.1:$2/v1/chat/completions")
  after=$(cpu_ticks "$3")
  if grep -q "Non-2xx" <<<"$output"; then echo "$1: answers other than 2xx" >&2; exit 1; fi
  awk -v label="$1" -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" \
    -v requests="$(awk '/requests in/ {print $1}' <<<"$output")" \
    -v rate="$(awk '/Requests\/sec/ {print $2}' <<<"$output")" \
    'BEGIN {printf "%s %.2f %s\n", label, ticks * 1e6 / hz / requests, rate}'
}
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $mode, $request; A = $a, B = $b"
for round in $(seq "$rounds"); do
  if ((round % 2)); then
    measure A "$port_a" "$pid_a"; measure B "$port_b" "$pid_b"
  else
    measure B "$port_b" "$pid_b"; measure A "$port_a" "$pid_a"
  fi
done | tee "$work/rounds"
awk '{sum[$1] += $2; n[$1]++; all[$1] = all[$1] " " $2}
     END {for (k in sum) printf "%s: mean %.2f hop CPU µs/req (rounds:%s)\n", k, sum[k] / n[k], all[k]}' \
  "$work/rounds" | sort
