#!/usr/bin/env bash
# Builds the fuzz seed corpus from the recorded exchanges in fixtures/.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p seeds/requests seeds/responses seeds/streams
for file in ../fixtures/*/*.request.json; do cp "$file" "seeds/requests/$(basename "$(dirname "$file")")-$(basename "$file")"; done
for file in ../fixtures/*/*.response.json ../fixtures/streams/*.json; do cp "$file" "seeds/responses/$(basename "$(dirname "$file")")-$(basename "$file")"; done
# The stream target reads its first byte as the chunk size.
for file in ../fixtures/*/*.sse; do
  { printf '\x07'; cat "$file"; } > "seeds/streams/$(basename "$(dirname "$file")")-$(basename "$file")"
done
