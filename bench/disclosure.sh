#!/usr/bin/env bash
# Measures progressive tool disclosure (tool_disclosure, issue 43) on the bench's realistic
# 200-tool catalog: the bytes the upstream receives with and without it, and the gateway's CPU
# per exchange with no discovery round, one and two (src/bin/disclosure.rs). Builds the release
# gateway and the driver, runs it, and prints the markdown report (bench/results/disclosure.md
# holds the last one, with what it means). About 2 minutes of runs after the builds (the first
# release build of toolgate takes ~10 minutes on 2 cores).
#
#   bench/disclosure.sh [--exchanges 2000] [--rounds 5] [--connections 4] [--only gd0,gd1] …
#
# TOOLGATE_BIN=path skips building the gateway and measures that binary instead.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-target}
if [[ -z ${TOOLGATE_BIN:-} ]]; then
  cargo build --release -p toolgate
  TOOLGATE_BIN=$target/release/toolgate
fi
cargo build --release -p toolgate-bench --bin disclosure
echo "commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo ' (with uncommitted changes)'); $(nproc) cores" >&2
"$target/release/disclosure" --toolgate "$TOOLGATE_BIN" "$@"
