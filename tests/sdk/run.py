"""What an SDK user sees through toolgate: the driver of tests/gateway/sdks/.

Usage: python3 tests/sdk/run.py GATEWAY_URL CASES_JSON

CASES_JSON is a list of cases, each {"case": name, "sdk": "openai" | "anthropic",
"call": "chat" | "responses" | "retrieve" | "messages", "stream": bool, "request": {...}}
("retrieve" takes "id" instead of "request"). Each case is performed with the official SDK
(openai or anthropic from PyPI) against the gateway, in order, and one JSON line is printed per
case: the tool calls the user could read (name and arguments, also those read before an error),
the text, the stream events seen, and the exception raised, if any (class, HTTP status, body).
The assertions are in the Rust test; this script only reports.
"""

import json
import sys

import anthropic
import openai


def openai_client(base):
    # No retries: a 5xx must reach the test as the exception the user would get, once.
    return openai.OpenAI(base_url=base + "/v1", api_key="sk-client-key", max_retries=0, timeout=30)


def anthropic_client(base):
    return anthropic.Anthropic(base_url=base, api_key="sk-client-key", max_retries=0, timeout=30)


def chat(client, case, seen):
    request = case["request"]
    if not case["stream"]:
        completion = client.chat.completions.create(**request)
        for choice in completion.choices or []:
            seen["text"] += choice.message.content or ""
            for call in choice.message.tool_calls or []:
                if call.type == "function":
                    seen["calls"].append({"name": call.function.name, "arguments": call.function.arguments})
                else:
                    seen["calls"].append({"name": call.custom.name, "arguments": call.custom.input})
        return
    calls = {}  # (choice, index) -> call, in the order the fragments arrive
    seen["calls"] = calls
    for chunk in client.chat.completions.create(**request, stream=True):
        label = "chunk"
        for choice in chunk.choices or []:
            if choice.delta.content:
                seen["text"] += choice.delta.content
                label = "content"
            for fragment in choice.delta.tool_calls or []:
                label = "tool_calls"
                call = calls.setdefault((choice.index, fragment.index), {"name": "", "arguments": ""})
                if fragment.function is not None:
                    call["name"] += fragment.function.name or ""
                    call["arguments"] += fragment.function.arguments or ""
        seen["events"].append(label)


def responses(client, case, seen):
    request = case["request"]
    if not case["stream"]:
        response = client.responses.create(**request)
        read_output(response.output, seen)
        return
    calls = {}  # output_index -> call
    seen["calls"] = calls
    for event in client.responses.create(**request, stream=True):
        seen["events"].append(event.type)
        if event.type in ("response.output_item.added", "response.output_item.done"):
            item = event.item
            if item.type == "function_call":
                calls[event.output_index] = {"name": item.name, "arguments": item.arguments}
            elif item.type == "custom_tool_call":
                calls[event.output_index] = {"name": item.name, "arguments": item.input}
        elif event.type == "response.function_call_arguments.delta":
            calls.setdefault(event.output_index, {"name": "", "arguments": ""})["arguments"] += event.delta
        elif event.type == "response.output_text.delta":
            seen["text"] += event.delta
        elif event.type == "response.completed":
            # The final response the user reads: its output may name calls of its own.
            final = {"calls": [], "text": ""}
            read_output(event.response.output, final)
            for index, call in enumerate(final["calls"]):
                if call not in calls.values():
                    calls[("completed", index)] = call


def retrieve(client, case, seen):
    read_output(client.responses.retrieve(case["id"]).output, seen)


def read_output(output, seen):
    for item in output or []:
        if item.type == "function_call":
            seen["calls"].append({"name": item.name, "arguments": item.arguments})
        elif item.type == "custom_tool_call":
            seen["calls"].append({"name": item.name, "arguments": item.input})
        elif item.type == "message":
            seen["text"] += "".join(getattr(part, "text", "") for part in item.content)


def messages(client, case, seen):
    request = case["request"]
    if not case["stream"]:
        read_content(client.messages.create(**request).content, seen)
        return
    with client.messages.stream(**request) as stream:
        try:
            for event in stream:
                seen["events"].append(event.type)
            read_content(stream.get_final_message().content, seen)
        except Exception:
            # What the helper had accumulated when the error came: the user could read it.
            read_content(stream.current_message_snapshot.content, seen)
            raise


def read_content(content, seen):
    for block in content or []:
        if block.type in ("tool_use", "server_tool_use"):
            seen["calls"].append({"name": block.name, "arguments": block.input})
        elif block.type == "text":
            seen["text"] += block.text


CALLS = {"chat": chat, "responses": responses, "retrieve": retrieve, "messages": messages}


def perform(base, case):
    seen = {"case": case["case"], "calls": [], "text": "", "events": [], "error": None}
    client = openai_client(base) if case["sdk"] == "openai" else anthropic_client(base)
    try:
        CALLS[case["call"]](client, case, seen)
    except Exception as error:  # the point is to report whatever the user gets
        seen["error"] = {
            "class": type(error).__name__,
            "module": type(error).__module__.split(".")[0],
            "status": getattr(error, "status_code", None),
            "body": getattr(error, "body", None),
            "message": str(error),
        }
    if isinstance(seen["calls"], dict):
        seen["calls"] = list(seen["calls"].values())
    return seen


def main():
    base, cases = sys.argv[1], json.loads(sys.argv[2])
    for case in cases:
        print(json.dumps(perform(base, case), default=str), flush=True)


if __name__ == "__main__":
    main()
