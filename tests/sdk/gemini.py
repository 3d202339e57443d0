"""What a Gen AI SDK user sees through toolgate on a Gemini route: the driver of
tests/gateway/gemini.rs.

Usage: python3 tests/sdk/gemini.py GATEWAY_URL CASES_JSON

CASES_JSON is a list of cases, each {"case": name, "stream": bool, "model": str, "contents":
..., "tools": [...]}. Each case is performed with the official `google-genai` SDK from PyPI
against the gateway, in order, and one JSON line is printed per case: the function calls the
user could read (also those read before an error), the text, and the exception raised, if any
(its class, code, status and message). The assertions are in the Rust test.
"""

import json
import sys

from google import genai
from google.genai import errors, types


def record(response, seen):
    for call in response.function_calls or []:
        seen["calls"].append({"name": call.name, "args": call.args, "id": call.id})
    for candidate in response.candidates or []:
        for part in (candidate.content.parts if candidate.content else None) or []:
            if part.text and not part.thought:
                seen["text"] += part.text


def main():
    base, cases = sys.argv[1], json.loads(sys.argv[2])
    client = genai.Client(
        api_key="client-gemini-key",
        http_options=types.HttpOptions(
            base_url=base,
            api_version="v1beta",
            retry_options=types.HttpRetryOptions(attempts=1),
        ),
    )
    for case in cases:
        seen = {"case": case["case"], "calls": [], "text": "", "error": None}
        config = types.GenerateContentConfig(tools=case["tools"])
        arguments = {"model": case["model"], "contents": case["contents"], "config": config}
        try:
            if case["stream"]:
                for chunk in client.models.generate_content_stream(**arguments):
                    record(chunk, seen)
            else:
                record(client.models.generate_content(**arguments), seen)
        except errors.APIError as error:
            seen["error"] = {
                "class": type(error).__name__,
                "code": error.code,
                "status": error.status,
                "message": error.message,
                "details": error.details,
            }
        print(json.dumps(seen), flush=True)


if __name__ == "__main__":
    main()
