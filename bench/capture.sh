#!/usr/bin/env bash
# What `[audit] capture` and the console's live feed cost the gateway (issue 46): one toolgate
# build on the guarded route of the benchmark (tool_selection, allowed answers: nothing is
# blocked), one process per setting, measured in alternating rounds (forward, then backward) so
# load from whoever shares the machine falls on all alike. Prints each round's hop CPU µs/req
# (the process's user+system time over the run divided by the requests it served) and req/s,
# then each setting's median, and what each process captured (`toolgate_captures_total`).
#
#   cargo build --release -p toolgate -p toolgate-bench --bins
#   bench/capture.sh [BIN_DIR=target/release] [ROUNDS=6] [SECONDS=5] [SETTINGS="..."]
#
# Settings (audit lines go to /dev/null: written, as on a real gateway, with no disk to wait on):
#   no-audit          audit output off, capture off: the benchmark's guarded row (d)
#   no-audit+blocked  audit output off, capture "blocked"
#   off               audit on, capture off
#   blocked           audit on, capture "blocked"
#   all               audit on, capture "all" (every exchange kept in the 16 MiB ring)
#   off+live          as off, with one console on the live feed (/console/api/events)
#   all+live          as all, with one console on the live feed
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

bin_dir=${1:-target/release}
rounds=${2:-6}
seconds=${3:-5}
read -r -a settings <<<"${4:-no-audit no-audit+blocked off blocked all off+live all+live}"

# start_setting SETTING: toolgate with the audit output and capture SETTING names, its admin
# listener on loopback, and a console on its live feed for a `+live` setting.
declare -A pid_of address_of admin_of
start_setting() {
  local setting=$1 base=${1%+live} port admin output=/dev/null capture
  port=$(free_port)
  admin=$(free_port)
  case $base in
    no-audit) output=off capture=off ;;
    no-audit+blocked) output=off capture=blocked ;;
    *) capture=$base ;;
  esac
  cat >"$work/$setting.toml" <<EOT
[server]
listen = "127.0.0.1:$port"
admin_listen = "127.0.0.1:$admin"
[upstreams.bench]
url = "http://$upstream"
[audit]
output = "$output"
capture = "$capture"
$GUARD_PLUGINS
[[routes]]
path = "/v1"
upstream = "bench"
EOT
  TOOLGATE_LOG=warn "$bin_dir/toolgate" serve --config "$work/$setting.toml" >"$work/$setting.log" 2>&1 &
  pid_of[$setting]=$!
  pids+=($!)
  address_of[$setting]=127.0.0.1:$port
  admin_of[$setting]=127.0.0.1:$admin
  for _ in $(seq 50); do (echo >"/dev/tcp/127.0.0.1/$admin") 2>/dev/null && break; sleep 0.1; done
  if [[ $setting == *+live ]]; then
    # The console's feed, read and thrown away; curl's own CPU is not the gateway's.
    curl -sN "http://127.0.0.1:$admin/console/api/events" >"$work/$setting.events" &
    pids+=($!)
  fi
}

bench_setup "$bin_dir"
for setting in "${settings[@]}"; do start_setting "$setting"; done

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; binaries: $bin_dir;" \
  "$rounds rounds of $seconds s (after 2 s of warm-up each)"
for round in $(seq "$rounds"); do
  order=("${settings[@]}")
  if ((round % 2 == 0)); then
    order=()
    for ((i = ${#settings[@]} - 1; i >= 0; i--)); do order+=("${settings[i]}"); done
  fi
  for setting in "${order[@]}"; do
    echo "$setting $(hop_cpu "${address_of[$setting]}" "${pid_of[$setting]}" "$work/request.json" "$seconds")"
  done
done | tee "$work/rounds"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
# median COLUMN SETTING: the median of a column of the setting's rounds.
median() {
  awk -v s="$2" -v c="$1" '$1 == s {print $c}' "$work/rounds" | sort -g |
    awk '{v[NR] = $1} END {printf "%.2f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
printf '%-18s %8s %10s  %s\n' setting 'median' 'median' 'rounds'
printf '%-18s %8s %10s  %s\n' '' 'µs/req' 'req/s' '(hop CPU µs/req)'
for setting in "${settings[@]}"; do
  printf '%-18s %8s %10s  %s\n' "$setting" "$(median 2 "$setting")" "$(median 3 "$setting")" \
    "$(awk -v s="$setting" '$1 == s {printf "%s ", $2}' "$work/rounds")"
done
echo
for setting in "${settings[@]}"; do
  kept=$(curl -s "http://${admin_of[$setting]}/metrics" | awk '/^toolgate_captures_total/ {printf "%s ", $0}')
  events=""
  if [[ $setting == *+live ]]; then events="; live events received: $(grep -c '^data: ' "$work/$setting.events" || true)"; fi
  echo "$setting: ${kept:-no captures counted}$events"
done
