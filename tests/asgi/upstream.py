"""A real ASGI model server for tests/gateway/request_paths.rs: FastAPI on uvicorn, as vLLM is.

Every generation endpoint answers with a call to `delete_user` (whole or streamed, as the request
asks), so a request that reaches one past toolgate's guard shows up as a tool call the client
reads. Each answer says in `x-seen-path` which path the server routed on. Run:
`python3 tests/asgi/upstream.py PORT`.
"""
import json
import sys

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

app = FastAPI()
CALL = {"id": "call_1", "type": "function",
        "function": {"name": "delete_user", "arguments": "{\"id\": 7}"}}


def seen(request: Request) -> dict:
    return {"x-seen-path": request.url.path}


def events(chunks):
    for chunk in chunks:
        yield "data: " + json.dumps(chunk) + "\n\n"


@app.post("/v1/chat/completions")
async def chat(request: Request):
    body = await request.json()
    if body.get("stream"):
        chunks = [
            {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [
                 dict(CALL, index=0)]}, "finish_reason": None}]},
            {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        ]
        stream = (line for line in [*events(chunks), "data: [DONE]\n\n"])
        return StreamingResponse(stream, media_type="text/event-stream", headers=seen(request))
    return JSONResponse({
        "id": "c", "object": "chat.completion", "created": 1, "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": None, "tool_calls": [CALL]}}],
    }, headers=seen(request))


@app.post("/v1/responses")
async def responses(request: Request):
    return JSONResponse({
        "id": "resp_1", "object": "response", "status": "completed", "model": "m",
        "output": [{"type": "function_call", "id": "fc_1", "call_id": "call_1",
                    "name": "delete_user", "arguments": "{\"id\": 7}", "status": "completed"}],
    }, headers=seen(request))


@app.post("/v1/messages")
async def messages(request: Request):
    return JSONResponse({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "stop_reason": "tool_use",
        "content": [{"type": "tool_use", "id": "toolu_1", "name": "delete_user",
                     "input": {"id": 7}}],
    }, headers=seen(request))


@app.get("/v1/models")
async def models(request: Request):
    return JSONResponse({"object": "list", "data": [{"id": "m", "object": "model"}]},
                        headers=seen(request))


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
