#!/usr/bin/env bash
# Where guard − plain goes, symbol by symbol: toolgate without plugins and with tool_selection
# from one build, each sampled by `perf record -e cpu-clock` while wrk saturates it with the
# benchmark's chat request (or BODY), in alternating rounds. Prints each path's CPU a request
# split into user and kernel time, then the symbols whose time a request grew most on the
# guarded path (the mean over the rounds). Unlike instructions.sh it sees the kernel, cache
# misses and the scheduler; unlike hop-cpu.sh it says where. Needs perf, wrk and python3.
#
#   cargo build --release -p toolgate -p toolgate-bench --bins
#   bench/perf-symbols.sh [BIN_DIR=target/release] [request.json|request-agent-turns-50k.json|…] [SECONDS=8] [ROUNDS=2] [TOP=30]
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

bin_dir=${1:-target/release}
request=${2:-request.json}
seconds=${3:-8}
rounds=${4:-2}
top=${5:-30}
command -v perf >/dev/null || { apt-get update -qq && apt-get install -y -qq linux-perf; }

bench_setup "$bin_dir"
start_toolgate plain "$bin_dir/toolgate" ""
plain_pid=$toolgate_pid plain=$toolgate_address
start_toolgate guard "$bin_dir/toolgate" "$GUARD_PLUGINS"
guard_pid=$toolgate_pid guard=$toolgate_address

# sample LABEL ADDRESS PID: warms the process, then records it for $seconds under wrk, and
# writes $work/LABEL.requests and $work/LABEL.symbols (the share of each symbol, and the
# recording's total CPU time in ns on the first line).
sample() {
  local output
  BODY=$work/$request wrk -t1 -c16 -d2s -s "$work/post.lua" "http://$2/v1/chat/completions" >/dev/null
  perf record -q -e cpu-clock -F 4000 -p "$3" -o "$work/$1.data" -- sleep "$seconds" >/dev/null 2>&1 &
  local recording=$!
  output=$(BODY=$work/$request wrk -t1 -c16 -d"${seconds}s" -s "$work/post.lua" "http://$2/v1/chat/completions")
  wait "$recording"
  if grep -q "Non-2xx" <<<"$output"; then echo "$2: answers other than 2xx" >&2; exit 1; fi
  awk '/requests in/ {print $1}' <<<"$output" >"$work/$1.requests"
  {
    perf report -i "$work/$1.data" --stdio --sort dso 2>/dev/null | awk '/Event count/ {print $NF}'
    perf report -i "$work/$1.data" --stdio --no-children --sort dso,sym 2>/dev/null | grep -E '^ +[0-9.]+%'
  } >"$work/$1.symbols"
}

for round in $(seq "$rounds"); do
  sample "plain-$round" "$plain" "$plain_pid"
  sample "guard-$round" "$guard" "$guard_pid"
done

echo "$request, $rounds rounds of ${seconds}s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$work" "$top" $(seq "$rounds") <<'EOT'
import collections, re, sys

work, top, rounds = sys.argv[1], int(sys.argv[2]), sys.argv[3:]

def per_request(label):
    """Each (kind, symbol)'s CPU µs a request; kind is k (kernel) or . (user)."""
    requests = int(open(f"{work}/{label}.requests").read())
    lines = open(f"{work}/{label}.symbols").read().splitlines()
    total_us = int(lines[0]) / 1e3
    times = collections.Counter()
    for line in lines[1:]:
        share = re.match(r"\s+([0-9.]+)%\s+\S+\s+\[(.)\]\s+(.*)", line)
        if share:
            kind, symbol = share.group(2), share.group(3).strip()
            times[(kind, symbol)] += float(share.group(1)) / 100 * total_us / requests
    return times

grown = collections.Counter()
for round in rounds:
    plain, guard = per_request(f"plain-{round}"), per_request(f"guard-{round}")
    split = lambda times, kind: sum(us for (k, _), us in times.items() if k == kind)
    print(f"round {round}: plain {sum(plain.values()):.1f} µs/req (user {split(plain, '.'):.1f}, "
          f"kernel {split(plain, 'k'):.1f}); guarded {sum(guard.values()):.1f} "
          f"(user {split(guard, '.'):.1f}, kernel {split(guard, 'k'):.1f})")
    for key in plain.keys() | guard.keys():
        grown[key] += (guard[key] - plain[key]) / len(rounds)

print(f"\nguard − plain, µs a request, the {top} symbols that grew most ([k] kernel, [.] user):")
for (kind, symbol), us in grown.most_common(top):
    print(f"{us:7.2f}  [{kind}] {symbol[:110]}")
EOT
