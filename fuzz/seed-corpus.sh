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
# The argument checks read a schema and arguments split at a NUL: each declared schema of the
# recorded requests, with the arguments of every recorded call (a call matches its own tool's
# schema or fails another's) and with nothing.
mkdir -p seeds/arguments
python3 - <<'PY'
import glob, json, pathlib

schemas, arguments = set(), {""}
for path in glob.glob("../fixtures/*/*.request.json"):
    for tool in json.load(open(path)).get("tools", []):
        schema = (tool.get("function") or {}).get("parameters") or tool.get("input_schema") or tool.get("parameters")
        if isinstance(schema, dict):
            schemas.add(json.dumps(schema, sort_keys=True))
for path in glob.glob("../fixtures/*/*.response.json"):
    def walk(value):
        if isinstance(value, dict):
            for key, inner in value.items():
                if key == "arguments" and isinstance(inner, str):
                    arguments.add(inner)
                elif key == "input" and isinstance(inner, dict):
                    arguments.add(json.dumps(inner))
                else:
                    walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)
    walk(json.load(open(path)))
for index, (schema, argument) in enumerate((s, a) for s in sorted(schemas) for a in sorted(arguments)):
    pathlib.Path(f"seeds/arguments/{index:04}").write_bytes(schema.encode() + b"\0" + argument.encode())
PY
# Inputs that once failed a target stay in its seeds, so every CI run tries them again.
for dir in regressions/*/; do
  [ -d "$dir" ] && cp "$dir"* "seeds/$(basename "$dir")/"
done
# The string skip reads its input as a string's text after the opening quote: the strings of the
# recorded requests as written, and each request written as a string (escaped JSON, as an
# agent's tool results are), once and twice.
mkdir -p seeds/strings
python3 - <<'PY'
import glob, json, pathlib

texts = set()
for path in glob.glob("../fixtures/*/*.request.json"):
    request = json.load(open(path))
    def walk(value):
        if isinstance(value, dict):
            for inner in value.values():
                walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)
        elif isinstance(value, str):
            texts.add(json.dumps(value, ensure_ascii=False))
    walk(request)
    once = json.dumps(json.dumps(request))
    texts.update([once, json.dumps(once)])
for index, text in enumerate(sorted(texts)):
    pathlib.Path(f"seeds/strings/{index:04}").write_bytes(text[1:].encode())
PY
