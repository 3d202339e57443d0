#!/usr/bin/env bash
# Installs the Node SDKs and frameworks whose snippets docs/frameworks.md shows (from the npm
# registry) into .ci/frameworks/ (git-ignored), where tests/gateway/sdks/frameworks.rs runs them.
# Idempotent: a second run with everything present does nothing. Pinned: the guide describes
# what these versions do.
set -euo pipefail
cd "$(dirname "$0")"
dir=frameworks
packages=(
  "openai@7.55.0"
  "@anthropic-ai/sdk@1.10.0"
  "ai@7.0.173"
  "@ai-sdk/openai@4.0.118"
  "@openai/agents@0.20.0"
  "@google/genai@3.3.0"
  "zod@4.6.7"
)
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "node and npm are needed for the Node snippets of docs/frameworks.md" >&2
  exit 1
fi
missing=0
for package in "${packages[@]}"; do
  name=${package%@*}
  version=${package##*@}
  # A package present at another version (an older pin) counts as missing.
  node -e 'process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)' \
    "./$dir/node_modules/$name/package.json" "$version" 2>/dev/null || missing=1
done
if [ "$missing" = 1 ]; then
  mkdir -p "$dir"
  # "type": "module" so the snippets' `import` lines and top-level `await` run as written.
  [ -f "$dir/package.json" ] || echo '{"name":"toolgate-framework-snippets","private":true,"type":"module"}' > "$dir/package.json"
  npm install --prefix "$dir" --save-exact --no-audit --no-fund --loglevel=error "${packages[@]}"
fi
