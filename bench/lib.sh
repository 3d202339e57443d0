# Shared by the quick CPU scripts (hop-cpu.sh, ab-cpu.sh): a scripted upstream, toolgate
# processes in front of it, and the hop CPU per request of a process under wrk. Sourced, not run.

# Starts the scripted upstream from BIN_DIR and writes the benchmark's requests into $work.
# Sets: work, pids, upstream.
bench_setup() {
  local bin_dir=$1
  command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
  work=$(mktemp -d)
  pids=()
  trap bench_cleanup EXIT
  "$bin_dir/bench-upstream" --write-requests "$work" >/dev/null
  "$bin_dir/bench-upstream" >"$work/upstream.out" 2>&1 &
  pids+=($!)
  upstream=$(listen_of "$work/upstream.out")
  cat >"$work/post.lua" <<'EOT'
local file = io.open(os.getenv("BODY"), "rb")
wrk.method = "POST"
wrk.body = file:read("*a")
file:close()
wrk.headers["Content-Type"] = "application/json"
EOT
}

bench_cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}

# The address a bench binary printed on its LISTEN line.
listen_of() {
  for _ in $(seq 50); do grep -q LISTEN "$1" && break; sleep 0.1; done
  awk '/LISTEN/ {print $2}' "$1"
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The plugin table of tool_selection as the benchmark runs it.
GUARD_PLUGINS=$'[[plugins]]\nname = "tool_selection"\nmode = "enforce"\n[plugins.settings]\nstrict = false'

# write_config NAME PORT PLUGINS [ROUTE_EXTRA]: $work/NAME.toml, toolgate on PORT in front of the
# upstream, audit off; ROUTE_EXTRA is added to the route (default: unguarded_calls = "pass").
write_config() {
  # The plain rows are the bare hop (a route with no plugin refuses answers with calls otherwise).
  local route_extra=${4-'unguarded_calls = "pass"'}
  cat >"$work/$1.toml" <<EOT
[server]
listen = "127.0.0.1:$2"
admin_listen = "off"
[upstreams.bench]
url = "http://$upstream"
[audit]
output = "off"
$3
[[routes]]
path = "/v1"
upstream = "bench"
$route_extra
EOT
}

# write_config_for BINARY NAME PORT PLUGINS: write_config for the toolgate BINARY.
write_config_for() {
  if grep -qa unguarded_calls "$1"; then
    write_config "$2" "$3" "$4"
  else
    # A build from before unguarded_calls (f941ef3) refuses the key, and passes a plain route's
    # answers through unread anyway: what "pass" does since. So two builds either side of it
    # (ab-cpu.sh, hop-cpu.sh, instructions.sh with an older toolgate) measure the same bare hop.
    write_config "$2" "$3" "$4" ""
  fi
}

# start_toolgate NAME BINARY PLUGINS: toolgate in front of the upstream, audit off.
# Sets: toolgate_pid, toolgate_address.
start_toolgate() {
  local port
  port=$(free_port)
  write_config_for "$2" "$1" "$port" "$3"
  TOOLGATE_LOG=warn "$2" serve --config "$work/$1.toml" >"$work/$1.log" 2>&1 &
  toolgate_pid=$!
  pids+=("$toolgate_pid")
  toolgate_address=127.0.0.1:$port
  for _ in $(seq 50); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# hop_cpu ADDRESS PID BODY SECONDS: prints "µs/req req/s" of the process PID serving the
# benchmark's chat request BODY for SECONDS, after a 2 s warm-up.
hop_cpu() {
  BODY=$3 wrk -t1 -c32 -d2s -s "$work/post.lua" "http://$1/v1/chat/completions" >/dev/null
  local before after output
  before=$(cpu_ticks "$2")
  output=$(BODY=$3 wrk -t1 -c32 -d"${4}s" -s "$work/post.lua" "http://$1/v1/chat/completions")
  after=$(cpu_ticks "$2")
  if grep -q "Non-2xx" <<<"$output"; then echo "$1: answers other than 2xx" >&2; exit 1; fi
  awk -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" \
    -v requests="$(awk '/requests in/ {print $1}' <<<"$output")" \
    -v rate="$(awk '/Requests\/sec/ {print $2}' <<<"$output")" \
    'BEGIN {printf "%.2f %s\n", ticks * 1e6 / hz / requests, rate}'
}
