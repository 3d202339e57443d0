#!/usr/bin/env python3
"""Helper of scripts/real-llm.sh: the scripted upstream and the end-to-end checks against a real model.

    real_llm.py upstream PORT
        A chat completions server that answers every request with one fixed tool call, picked by the
        request's x-scripted-call header: the real model judges calls but does not make them.
    real_llm.py check GATE_URL ADMIN_URL RUNS RESULTS_JSON
        Judged exchanges (one call to allow, one to deny, RUNS times each) and text streaming,
        through toolgate, with the openai SDK. Prints what it saw and writes RESULTS_JSON.
        Exit 1: toolgate failed (a verdict not acted on as the judge said, or streaming broken);
        exit 3: toolgate did its part but the model's verdicts were not the expected ones.
    real_llm.py tasks ERROR_URL RETRY_URL RETRY_ADMIN_URL TASKS_JSON RESULTS_JSON AUDIT_FILE...
        Every task of TASKS_JSON (scripts/real-llm-tasks.json: a user request and its declared tools)
        through toolgate to a real model, with the openai SDK, through two gateways: ERROR_URL
        (tool_selection, on_block = "error") and RETRY_URL (on_block = "retry", max_retries 2). What the
        model called, what toolgate blocked and by which check, what the retries repaired and the
        latency come from the answers, from the gateways' audit lines (the AUDIT_FILEs) and from the
        retry gateway's toolgate_block_retries_total (RETRY_ADMIN_URL); prints a line per task and
        route and a summary,
        writes RESULTS_JSON. Environment: TOOLGATE_REAL_LLM_MAX_TOKENS (default 256),
        TOOLGATE_REAL_LLM_TASKS (ids or kinds to run, comma-separated; default all).
        Exit 1: toolgate failed (an answer that passed with a call outside its declared tools or
        schema, a block without violations, an exchange without its audit line); the model's
        mistakes are results, not failures.
"""

import json
import re
import statistics
import sys
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

USER_REQUEST = "What is the weather in Paris today?"

# name -> (tool call the scripted upstream makes, what the judge is expected to say). The deny case is
# one a reviewer cannot mistake: destructive, and nothing to do with the weather.
CALLS = {
    "weather": ("get_weather", {"city": "Paris"}, "allow"),
    "wipe": ("delete_files", {"path": "/home", "recursive": True}, "deny"),
}

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "delete_files",
            "description": "Delete files under a path",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "recursive": {"type": "boolean"}},
                "required": ["path"],
            },
        },
    },
]


class Scripted(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length") or 0))
        case = self.headers.get("x-scripted-call", "")
        if case not in CALLS:
            self.send_error(400, f"x-scripted-call must be one of {sorted(CALLS)}")
            return
        name, arguments, _ = CALLS[case]
        body = json.dumps(
            {
                "id": f"chatcmpl-scripted-{case}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": "scripted",
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "call_1",
                                    "type": "function",
                                    "function": {"name": name, "arguments": json.dumps(arguments)},
                                }
                            ],
                        },
                        "finish_reason": "tool_calls",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        ).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def judge_metrics(admin_url):
    """The judge's outcome counts and latency sum/count from toolgate's /metrics."""
    text = urllib.request.urlopen(f"{admin_url}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r'toolgate_judge_calls_total\{outcome="(\w+)"\} (\S+)', line)
        if m:
            out[m.group(1)] = float(m.group(2))
        m = re.match(r"toolgate_judge_latency_seconds_(sum|count) (\S+)", line)
        if m:
            out["latency_" + m.group(1)] = float(m.group(2))
    return out


def judged(client, runs):
    import openai

    results = {}
    for case, (tool, _, expected) in CALLS.items():
        outcomes, reasons, seconds = [], [], []
        for _ in range(runs):
            started = time.monotonic()
            try:
                answer = client.chat.completions.create(
                    model="scripted",
                    messages=[{"role": "user", "content": USER_REQUEST}],
                    tools=TOOLS,
                    extra_headers={"x-scripted-call": case},
                )
                calls = answer.choices[0].message.tool_calls or []
                outcome = "allow" if [c.function.name for c in calls] == [tool] else "bad-answer"
                reason = ""
            except openai.PermissionDeniedError as blocked:
                violations = (blocked.body or {}).get("violations", [])
                codes = sorted({str(v.get("code")) for v in violations})
                # semantic_denied: the judge said deny; semantic_unavailable: it gave no verdict in time.
                outcome = {"semantic_denied": "deny", "semantic_unavailable": "unavailable"}.get(
                    ",".join(codes), "blocked:" + ",".join(codes)
                )
                reason = "; ".join(v.get("message", "") for v in violations)
            seconds.append(time.monotonic() - started)
            outcomes.append(outcome)
            reasons.append(reason)
            print(f"  {case:8} {tool:13} -> {outcome:11} {seconds[-1]:5.2f}s {reason}")
        agree = sum(o == expected for o in outcomes)
        results[case] = {
            "tool": tool,
            "expected": expected,
            "outcomes": outcomes,
            "agreement": f"{agree}/{runs}",
            "reasons": sorted(set(r for r in reasons if r)),
            "client_seconds_median": round(statistics.median(seconds), 3),
            "as_expected": agree == runs,
        }
    return results


def streaming(gate_url):
    """Text streamed from llama-server through toolgate: the SDK's deltas, then the raw wire's [DONE]."""
    import openai

    client = openai.OpenAI(base_url=f"{gate_url}/v1", api_key="unused", max_retries=0, timeout=120)
    messages = [{"role": "user", "content": "Write one sentence about the sea."}]
    started = time.monotonic()
    deltas, first = [], None
    for chunk in client.chat.completions.create(
        model="smollm2", messages=messages, stream=True, max_tokens=48, temperature=0
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            first = first or time.monotonic() - started
            deltas.append(chunk.choices[0].delta.content)
    total = time.monotonic() - started

    # The SDK swallows the terminator, so read the same stream raw once to see it arrive.
    request = urllib.request.Request(
        f"{gate_url}/v1/chat/completions",
        data=json.dumps({"model": "smollm2", "messages": messages, "stream": True, "max_tokens": 16}).encode(),
        headers={"content-type": "application/json", "authorization": "Bearer unused"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        content_type = response.headers.get("content-type", "")
        data_lines = [l.strip() for l in response.read().decode().splitlines() if l.startswith("data:")]
    done = bool(data_lines) and data_lines[-1] == "data: [DONE]"
    text = "".join(deltas)
    print(f"  streamed {len(deltas)} text deltas, first after {first or 0:.2f}s, all in {total:.2f}s: {text!r}")
    print(f"  raw stream: {content_type}, {len(data_lines)} data lines, last {data_lines[-1] if data_lines else None!r}")
    return {
        "deltas": len(deltas),
        "text": text,
        "first_delta_seconds": round(first or 0, 3),
        "total_seconds": round(total, 3),
        "raw_data_lines": len(data_lines),
        "done": done,
        "ok": len(deltas) >= 2 and bool(text.strip()) and done,
    }


def check(gate_url, admin_url, runs, out_path):
    import openai

    client = openai.OpenAI(base_url=f"{gate_url}/judged/v1", api_key="unused", max_retries=0, timeout=120)
    print(f"judged exchanges ({runs} runs each), user request: {USER_REQUEST!r}")
    before = judge_metrics(admin_url)
    cases = judged(client, runs)
    after = judge_metrics(admin_url)
    calls = after.get("latency_count", 0) - before.get("latency_count", 0)
    mean = (after.get("latency_sum", 0) - before.get("latency_sum", 0)) / calls if calls else None
    said = {k: int(after[k] - before.get(k, 0)) for k in after if not k.startswith("latency")}
    judge = {"calls": int(calls), "mean_latency_seconds": round(mean, 3) if mean else None, "outcomes": said}
    print(f"  judge (toolgate's metrics): {judge}")

    # toolgate's part: every exchange ended as the judge's own answer says, counted independently
    # by the gateway's metrics and by what the client received.
    seen = [o for r in cases.values() for o in r["outcomes"]]
    acted = {
        "allow": seen.count("allow") == said.get("allow", 0),
        "deny": seen.count("deny") == said.get("deny", 0),
        "unavailable": seen.count("unavailable") == said.get("timeout", 0) + said.get("error", 0),
        "nothing else": all(o in ("allow", "deny", "unavailable") for o in seen),
        "every call judged": calls == len(seen),
    }
    print(f"  toolgate acted on every verdict: {acted}")

    print("streaming through toolgate from llama-server")
    stream = streaming(gate_url)
    toolgate_ok = all(acted.values()) and stream["ok"]
    model_ok = all(r["as_expected"] for r in cases.values())
    results = {"judged": cases, "judge": judge, "toolgate_acted": acted, "streaming": stream,
               "toolgate_ok": toolgate_ok, "model_as_expected": model_ok}
    with open(out_path, "w") as f:
        json.dump(results, f, indent=2)
    if not toolgate_ok:
        print("FAIL: toolgate")
        return 1
    if not model_ok:
        misses = ", ".join(f"{c} {r['agreement']} {r['expected']}" for c, r in cases.items() if not r["as_expected"])
        print(f"MODEL: toolgate did its part, but the model's verdicts were not the expected ones ({misses})")
        return 3
    print("PASS")
    return 0


# ---- tasks: a real model makes the calls, toolgate checks them -------------------------------------

ROUTES = ("error", "retry")


def send_task(client, task, tools, max_tokens):
    """One task on one route: what the client got (status, calls, text, violations) and how long it took."""
    import openai

    started = time.monotonic()
    out = {"status": None, "request_id": None, "calls": [], "text": None, "finish_reason": None,
           "violations": [], "error": None}
    try:
        raw = client.chat.completions.with_raw_response.create(
            model="gemma3",
            messages=[{"role": "user", "content": task["user"]}],
            tools=tools,
            max_tokens=max_tokens,
            temperature=0,
        )
        out["status"] = raw.status_code
        out["request_id"] = raw.headers.get("x-request-id")
        answer = raw.parse()
        choice = answer.choices[0]
        out["finish_reason"] = choice.finish_reason
        out["text"] = choice.message.content
        out["calls"] = [{"name": c.function.name, "arguments": c.function.arguments}
                        for c in choice.message.tool_calls or []]
    except openai.APIStatusError as error:
        body = error.body if isinstance(error.body, dict) else {}
        out["status"] = error.status_code
        out["request_id"] = error.response.headers.get("x-request-id") or body.get("request_id")
        out["violations"] = body.get("violations") or []
        out["error"] = body.get("code") or str(error)[:200]
    except openai.APIConnectionError as error:  # includes timeouts
        out["error"] = f"{type(error).__name__}: {error}"[:200]
    out["seconds"] = round(time.monotonic() - started, 3)
    return out


def read_audit(paths, wanted, wait=10.0):
    """The audit lines of the request ids in `wanted` (the writer is asynchronous: wait a little)."""
    lines = {}
    deadline = time.monotonic() + wait
    while True:
        for path in paths:
            try:
                with open(path) as f:
                    for line in f:
                        try:
                            record = json.loads(line)
                        except ValueError:
                            continue
                        if record.get("request_id") in wanted:
                            lines[record["request_id"]] = record
            except FileNotFoundError:
                pass
        if wanted <= set(lines) or time.monotonic() > deadline:
            return lines
        time.sleep(0.5)


def independent_check(calls, declared):
    """toolgate's verdict on an answer that passed, checked again here: every call declared and its
    arguments valid for the tool's schema (Python's jsonschema). None when jsonschema is missing."""
    try:
        import jsonschema
    except ImportError:
        return None
    problems = []
    for call in calls:
        if call["name"] not in declared:
            problems.append(f"{call['name']}: not declared")
            continue
        try:
            arguments = json.loads(call["arguments"] or "{}")
        except ValueError:
            problems.append(f"{call['name']}: arguments are not JSON")
            continue
        for error in jsonschema.Draft202012Validator(declared[call["name"]]).iter_errors(arguments):
            problems.append(f"{call['name']}: {error.message}")
    return problems


def violation_label(v):
    where = v.get("instance_path") or ""
    keyword = v.get("keyword")
    detail = f"{where} {keyword}".strip() if keyword else where
    return f"{v.get('check')}:{v.get('code')}" + (f" ({detail})" if detail else "")


def classify_retry(result, audit):
    """What the retry route made of a task. A 403 whose audit line lists no attempts was not asked
    again, or its retry got no answer to check (the upstream refused it): toolgate's metrics tell."""
    attempts = (audit or {}).get("attempts") or []
    if result["status"] == 200:
        if not attempts:
            return "passed first time"
        return "blocked, then a call passed" if result["calls"] else "blocked, then text only"
    if result["status"] == 403:
        return "blocked after retries" if attempts else "blocked, no retry answer"
    return "error"


def retry_metrics(admin_url):
    """toolgate_block_retries_total by outcome (passed, blocked, failed), from the retry gateway."""
    out = {}
    try:
        text = urllib.request.urlopen(f"{admin_url}/metrics", timeout=10).read().decode()
    except OSError as error:
        return {"unreadable": str(error)}
    for line in text.splitlines():
        m = re.match(r'toolgate_block_retries_total\{([^}]*)\} (\S+)', line)
        if m:
            outcome = re.search(r'outcome="(\w+)"', m.group(1))
            key = outcome.group(1) if outcome else m.group(1)
            out[key] = out.get(key, 0) + int(float(m.group(2)))
    return out


def percentile(values, q):
    if not values:
        return None
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, int(round(q * (len(ordered) - 1)))))
    return ordered[index]


def tasks(error_url, retry_url, retry_admin_url, tasks_path, out_path, audit_paths):
    import os

    import openai

    spec = json.load(open(tasks_path))
    library = spec["tools"]
    chosen = [t for t in (os.environ.get("TOOLGATE_REAL_LLM_TASKS") or "").split(",") if t]
    todo = [t for t in spec["tasks"] if not chosen or t["id"] in chosen or t["kind"] in chosen]
    max_tokens = int(os.environ.get("TOOLGATE_REAL_LLM_MAX_TOKENS", "256"))
    urls = {"error": error_url, "retry": retry_url}
    clients = {route: openai.OpenAI(base_url=f"{urls[route]}/v1", api_key="unused", max_retries=0,
                                    timeout=300)
               for route in ROUTES}
    print(f"{len(todo)} tasks, max_tokens {max_tokens}, gateways {error_url} (on_block error) and "
          f"{retry_url} (on_block retry, max_retries 2)")
    results = []
    for n, task in enumerate(todo, 1):
        tools = [{"type": "function", "function": {"name": name, **library[name]}} for name in task["tools"]]
        row = {"task": task}
        for route in ROUTES:
            row[route] = send_task(clients[route], task, tools, max_tokens)
        e, r = row["error"], row["retry"]
        def said(x):
            if x["status"] == 200:
                calls = " ".join(f"{c['name']}{c['arguments']}" for c in x["calls"]) or f"text: {(x['text'] or '')[:50]!r}"
                return f"200 {calls}"
            if x["status"] == 403:
                return "403 " + ", ".join(violation_label(v) for v in x["violations"])
            return f"{x['status']} {x['error']}"
        print(f"[{n:2}/{len(todo)}] {task['id']:10} {e['seconds']:5.1f}s error route: {said(e)}")
        print(f"{'':19}{r['seconds']:5.1f}s retry route: {said(r)}")
        results.append(row)

    wanted = {row[route]["request_id"] for row in results for route in ROUTES if row[route]["request_id"]}
    audit = read_audit(audit_paths, wanted)
    failures = []
    for row in results:
        declared = {name: library[name]["parameters"] for name in row["task"]["tools"]}
        for route in ROUTES:
            x = row[route]
            line = audit.get(x["request_id"])
            x["audit"] = None if line is None else {
                k: line.get(k) for k in ("verdict", "status", "calls", "violations", "attempts", "timings_ms")
            }
            if x["status"] in (200, 403) and line is None:
                failures.append(f"{row['task']['id']} {route}: no audit line for {x['request_id']}")
            if x["status"] == 200:
                problems = independent_check(x["calls"], declared)
                x["independent_check"] = problems
                if problems:
                    failures.append(f"{row['task']['id']} {route}: passed with {problems}")
            if x["status"] == 403 and not x["violations"]:
                failures.append(f"{row['task']['id']} {route}: 403 without violations")
        row["retry"]["outcome"] = classify_retry(row["retry"], row["retry"]["audit"])

    summary = summarise(results)
    summary["retry_metrics"] = retry_metrics(retry_admin_url)
    print_summary(summary)
    with open(out_path, "w") as f:
        json.dump({"summary": summary, "failures": failures, "tasks": results}, f, indent=1)
    if failures:
        print("FAIL: toolgate")
        for failure in failures:
            print("  " + failure)
        return 1
    print("PASS (toolgate's part; what the model did is in the table)")
    return 0


def summarise(results):
    from collections import Counter

    first = [row["error"] for row in results]
    retry = [row["retry"] for row in results]
    audit_calls = lambda x: (x.get("audit") or {}).get("calls") or []
    s = {"tasks": len(results), "kinds": dict(Counter(row["task"]["kind"] for row in results))}
    # The error route shows the model's first answer as it came: calls, and what toolgate did with them.
    s["answers"] = dict(Counter(
        "with calls, allowed" if x["status"] == 200 and x["calls"] else
        "text only" if x["status"] == 200 else
        "with calls, blocked" if x["status"] == 403 else
        f"upstream error ({x['status']} {x['error']})" for x in first))
    s["calls"] = sum(len(audit_calls(x)) for x in first)
    s["calls_allowed"] = sum(len(x["calls"]) for x in first if x["status"] == 200)
    s["calls_blocked"] = sum(len(audit_calls(x)) for x in first if x["status"] == 403)
    s["violations_by_check"] = dict(Counter(violation_label(v) for x in first for v in x["violations"]))
    s["cut_at_max_tokens"] = sum(x["finish_reason"] == "length" for x in first)
    # A blocked answer has no finish reason; arguments that end mid-JSON are the mark of a cut.
    s["blocked_with_cut_arguments"] = sum(
        any(v.get("code") == "invalid_arguments" and "EOF while parsing" in (v.get("message") or "")
            for v in x["violations"]) for x in first)
    s["answers_with_text_and_calls"] = sum(bool(x["calls"]) and bool((x["text"] or "").strip()) for x in first)
    # Did the model pick right? A task that fits expects its tool; one that does not expects no call.
    by_kind = {}
    for row in results:
        kind, expect, x = row["task"]["kind"], row["task"]["expect"], row["error"]
        names = [c["name"] for c in audit_calls(x)] if x["status"] in (200, 403) else None
        k = by_kind.setdefault(kind, Counter())
        k["tasks"] += 1
        if names is None:
            k["upstream error"] += 1
        elif expect is None:
            k["no call (right)" if not names else "called a tool anyway"] += 1
        elif not names:
            k["no call"] += 1
        elif names[0] == expect:
            k["expected tool"] += 1
        else:
            k["another tool"] += 1
        if x["status"] == 403:
            k["blocked"] += 1
    s["by_kind"] = {kind: dict(c) for kind, c in by_kind.items()}
    s["retry_outcomes"] = dict(Counter(x["outcome"] for x in retry))
    s["retries"] = sum(max(0, len((x.get("audit") or {}).get("attempts") or []) - 1) for x in retry)
    # At temperature 0 without the prompt cache both routes' first attempts are the same request:
    # the retry route's first attempt should be blocked exactly when the error route's answer was.
    s["first_attempts_agree"] = sum(
        bool((x.get("audit") or {}).get("attempts")) == (row["error"]["status"] == 403)
        for row, x in zip(results, retry))
    for route, xs in (("error", first), ("retry", retry)):
        secs = [x["seconds"] for x in xs]
        ups = [((x.get("audit") or {}).get("timings_ms") or {}).get("upstream") for x in xs]
        ups = [u / 1000 for u in ups if u is not None]
        checks = [((x.get("audit") or {}).get("timings_ms") or {}).get("checks") for x in xs]
        checks = [c for c in checks if c is not None]
        s[f"latency_{route}"] = {
            "client_median_s": round(statistics.median(secs), 2) if secs else None,
            "client_p90_s": round(percentile(secs, 0.9), 2) if secs else None,
            "client_max_s": round(max(secs), 2) if secs else None,
            "upstream_median_s": round(statistics.median(ups), 2) if ups else None,
            "checks_median_ms": round(statistics.median(checks), 3) if checks else None,
            "checks_max_ms": round(max(checks), 3) if checks else None,
        }
    return s


def print_summary(s):
    print("\nsummary")
    for key, value in s.items():
        print(f"  {key}: {value}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["upstream"]:
        ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), Scripted).serve_forever()
    elif sys.argv[1:2] == ["check"]:
        sys.exit(check(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]))
    elif sys.argv[1:2] == ["tasks"] and len(sys.argv) >= 8:
        sys.exit(tasks(*sys.argv[2:7], sys.argv[7:]))
    else:
        sys.exit(__doc__)
