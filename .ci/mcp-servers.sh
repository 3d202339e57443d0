#!/usr/bin/env bash
# Installs the reference MCP servers the MCP tests run over stdio (from the npm registry) into
# .ci/mcp-servers/ (git-ignored). Idempotent: a second run with everything present does nothing.
set -euo pipefail
cd "$(dirname "$0")"
dir=mcp-servers
packages=(
  "@modelcontextprotocol/server-everything@2026.8.31"
  "@modelcontextprotocol/server-memory@2026.8.31"
  "@modelcontextprotocol/server-filesystem@2026.8.31"
)
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "== installing node and npm"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm
  else
    echo "node and npm are needed for the MCP tests" >&2
    exit 1
  fi
fi
missing=0
for package in "${packages[@]}"; do
  name=${package%@*}
  [ -f "$dir/node_modules/$name/package.json" ] || missing=1
done
if [ "$missing" = 1 ]; then
  mkdir -p "$dir"
  [ -f "$dir/package.json" ] || echo '{"name":"toolgate-mcp-test-servers","private":true}' > "$dir/package.json"
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "${packages[@]}"
fi
