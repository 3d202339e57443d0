# The no-bypass property's second oracle, independent of toolgate: the official OpenAI,
# Anthropic and Google Gen AI Python SDKs read each generated answer as their clients would,
# with the SDKs' own code (their JSON decoding of a response body, their SSE decoders and
# stream readers, their response converters, their model construction and their stream
# accumulators), and say which tool calls a client could act on.
#
# A long-lived process: one request per line on stdin,
#   {"body": "<base64>", "stream": true|false}
# one answer per line on stdout,
#   {"names": ["<tool name>", ...], "runs": [["<name>", "<arguments>"], ...]}
# (each string as base64 of its UTF-8 bytes, lone surrogates passed through).
# `names` is every call name any of the SDKs' readings shows (events as they are yielded, and
# the accumulated snapshots); `runs` is what a client runs from the final snapshot of each
# format's reading (name and arguments), for the clean-answer comparison.

import base64
import json
import sys
import warnings

# Models built from hostile answers make pydantic warn on every dump; the warnings say nothing
# the oracle needs.
warnings.filterwarnings("ignore")

from openai._models import construct_type as openai_construct
from openai._streaming import SSEDecoder as OpenAISSEDecoder
from openai.lib.streaming.chat._completions import ChatCompletionStreamState
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.responses import Response, ResponseStreamEvent
from openai import omit

from anthropic._models import construct_type as anthropic_construct
from anthropic._streaming import SSEDecoder as AnthropicSSEDecoder
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import Message, RawMessageStreamEvent

import httpx
from google.genai import _api_client as genai_client
from google.genai import models as genai_models
from google.genai import types as genai_types

CALL_ITEMS = ("function_call", "custom_tool_call")
ANTHROPIC_EVENTS = (
    "message_start",
    "message_delta",
    "message_stop",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
)


def text(value):
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, separators=(",", ":"))
    except Exception:
        return str(value)


def attr(obj, name):
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def listed(value):
    return value if isinstance(value, list) else []


def chat_message_calls(message):
    calls = []
    for call in listed(attr(message, "tool_calls")):
        for part, args in (("function", "arguments"), ("custom", "input")):
            inner = attr(call, part)
            if inner is not None:
                calls.append((text(attr(inner, "name")), text(attr(inner, args))))
    legacy = attr(message, "function_call")
    if legacy is not None:
        calls.append((text(attr(legacy, "name")), text(attr(legacy, "arguments"))))
    return calls


def chat_calls(completion):
    calls = []
    for choice in listed(attr(completion, "choices")):
        for part in ("message", "delta"):
            message = attr(choice, part)
            if message is not None:
                calls += chat_message_calls(message)
    return calls


def responses_item_call(item):
    kind = attr(item, "type")
    if kind == "function_call":
        return (text(attr(item, "name")), text(attr(item, "arguments")))
    if kind == "custom_tool_call":
        return (text(attr(item, "name")), text(attr(item, "input")))
    return None


def responses_calls(response):
    calls = []
    for item in listed(attr(response, "output")):
        call = responses_item_call(item)
        if call:
            calls.append(call)
    return calls


def anthropic_calls(message):
    # A block's `input` is the value the client holds (a string stays a string), unlike
    # OpenAI's `arguments`, which are JSON text.
    calls = []
    for block in listed(attr(message, "content")):
        if attr(block, "type") == "tool_use":
            calls.append((text(attr(block, "name")), json.dumps(attr(block, "input"))))
    return calls


def gemini_response(data):
    """A chunk or a whole answer as the Gen AI SDK hands it to its caller: its converter from
    the API's shape, then its pydantic model."""
    converted = genai_models._GenerateContentResponse_from_mldev(data)
    return genai_types.GenerateContentResponse._from_response(response=converted, kwargs={})


def gemini_calls(response):
    # Every candidate's function calls (`response.function_calls` reads the first only; a
    # client may read any). `args` is the value the client holds, as Anthropic's `input`.
    calls = []
    for candidate in listed(attr(response, "candidates")):
        content = attr(candidate, "content")
        for part in listed(attr(content, "parts")):
            call = attr(part, "function_call")
            if call is not None:
                calls.append((text(attr(call, "name")), json.dumps(attr(call, "args") or {})))
    return calls


def read_gemini_body(data, names, runs):
    try:
        calls = gemini_calls(gemini_response(data))
    except Exception:
        return
    names.update(name for name, _ in calls if name)
    runs += [call for call in calls if call[0]]


def read_gemini_stream(body, names, runs):
    # The SDK's own stream reader (its SSE lines and its raw JSON lines); every chunk is an
    # answer whose calls a client runs as they come, so a chunk read before a failure counts.
    try:
        response = genai_client.HttpResponse(
            headers={}, response_stream=httpx.Response(200, content=body)
        )
        for chunk in response.segments():
            if isinstance(chunk, dict) and "error" in chunk:
                break
            calls = gemini_calls(gemini_response(chunk))
            names.update(name for name, _ in calls if name)
            runs += [call for call in calls if call[0]]
    except Exception:
        pass


def json_of(body):
    # httpx's `response.json()`: json.loads on the bytes, which detects UTF-8/16/32.
    try:
        return json.loads(body)
    except Exception:
        return None


def read_body(body, names, runs):
    data = json_of(body)
    if isinstance(data, list):
        # A list of answers (Gemini's `streamGenerateContent` without `alt=sse`): a client
        # reads every one.
        for item in data:
            if isinstance(item, dict):
                read_answer(item, names, runs)
        return
    if isinstance(data, dict):
        read_answer(data, names, runs)


def read_answer(data, names, runs):
    for cast, reader, construct in (
        (ChatCompletion, chat_calls, openai_construct),
        (Response, responses_calls, openai_construct),
        (Message, anthropic_calls, anthropic_construct),
    ):
        try:
            calls = reader(construct(type_=cast, value=data))
        except Exception:
            continue
        names.update(name for name, _ in calls if name)
        runs += [call for call in calls if call[0]]
    read_gemini_body(data, names, runs)


def openai_events(body):
    """The events the OpenAI SDK yields, and whether it raised before the stream's end (its
    client then holds no finished answer to run)."""
    events = []
    try:
        for sse in OpenAISSEDecoder().iter_bytes(iter([body])):
            if sse.data.startswith("[DONE]"):
                break
            try:
                data = sse.json()
            except Exception:
                return events, True
            if isinstance(data, dict) and data.get("error"):
                return events, True
            events.append(data)
    except Exception:
        return events, True
    return events, False


def read_chat_stream(events, failed, names, runs):
    state = ChatCompletionStreamState()
    for data in events:
        try:
            chunk = openai_construct(type_=ChatCompletionChunk, value=data)
        except Exception:
            failed = True
            break
        # A chunk's names are fragments; the accumulated snapshot is what a client reads.
        try:
            state.handle_chunk(chunk)
        except Exception:
            failed = True
            break
    # Names come in fragments: what a client acts on is the snapshot of a stream the SDK read
    # to its end. Where it raised, its client got an error and a half-joined name is no call
    # (a client reading the chunks itself is the in-process oracle's).
    if failed:
        return
    try:
        final = chat_calls(state.current_completion_snapshot)
        names.update(name for name, _ in final if name)
        runs += [call for call in final if call[0]]
    except Exception:
        pass


def read_responses_stream(events, failed, names, runs):
    state = ResponseStreamState(input_tools=omit, text_format=omit)
    completed = None
    for data in events:
        try:
            event = openai_construct(type_=ResponseStreamEvent, value=data)
        except Exception:
            failed = True
            break
        # A client dispatches on the event's type, as the SDK's accumulator does.
        kind = attr(event, "type")
        try:
            item = attr(event, "item")
            if kind in ("response.output_item.added", "response.output_item.done") and item is not None:
                call = responses_item_call(item)
                if call and call[0]:
                    names.add(call[0])
            response = attr(event, "response")
            if isinstance(kind, str) and response is not None and kind.startswith("response.") and "." not in kind[len("response."):]:
                names.update(name for name, _ in responses_calls(response) if name)
                if kind == "response.completed":
                    completed = response
        except Exception:
            pass
        try:
            state.handle_event(event)
        except Exception:
            failed = True
            break
    if completed is not None and not failed:
        try:
            runs += [call for call in responses_calls(completed) if call[0]]
        except Exception:
            pass


def read_anthropic_stream(body, names, runs):
    snapshot = None
    buffers = {}
    failed = False
    try:
        for sse in AnthropicSSEDecoder().iter_bytes(iter([body])):
            if sse.event in (None, "ping") or not sse.data:
                continue
            if sse.event == "error":
                failed = True
                break
            try:
                data = sse.json()
                event = anthropic_construct(type_=RawMessageStreamEvent, value=data)
            except Exception:
                failed = True
                break
            # A client dispatches on the event's type, as the SDK's accumulator does.
            try:
                kind = attr(event, "type")
                block = attr(event, "content_block")
                if kind == "content_block_start" and attr(block, "type") == "tool_use":
                    names.add(text(attr(block, "name")))
                message = attr(event, "message")
                if kind == "message_start" and message is not None:
                    names.update(name for name, _ in anthropic_calls(message) if name)
            except Exception:
                pass
            try:
                snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=buffers)
            except Exception:
                failed = True
                break
            try:
                names.update(name for name, _ in anthropic_calls(snapshot) if name)
            except Exception:
                pass
    except Exception:
        failed = True
    if snapshot is not None and not failed:
        try:
            runs += [call for call in anthropic_calls(snapshot) if call[0]]
        except Exception:
            pass


def read_stream(body, names, runs):
    # `runs` are what a client runs from a stream its SDK read to the end without raising.
    events, failed = openai_events(body)
    read_chat_stream(events, failed, names, runs)
    read_responses_stream(events, failed, names, runs)
    read_anthropic_stream(body, names, runs)
    read_gemini_stream(body, names, runs)


def wire(value):
    return base64.b64encode(value.encode("utf-8", "surrogatepass")).decode("ascii")


def main():
    for line in sys.stdin:
        request = json.loads(line)
        body = base64.b64decode(request["body"])
        names, runs = set(), []
        if request["stream"]:
            read_stream(body, names, runs)
        else:
            read_body(body, names, runs)
        # Python strings may hold lone surrogates (`"\\ud800"` decodes to one), which JSON
        # readers elsewhere refuse: each string travels as base64 of its UTF-8 with surrogates
        # passed through, and the reader tells bytes that are not UTF-8 from any name.
        answer = {
            "names": [wire(name) for name in sorted(names)],
            "runs": [[wire(name), wire(arguments)] for name, arguments in runs],
        }
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
