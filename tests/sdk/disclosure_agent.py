"""An agent of the OpenAI Agents SDK (`openai-agents` on PyPI) with many tools, run through a
toolgate route with tool_disclosure: the driver of tests/gateway/disclosure/clients.rs.

Usage: python3 tests/sdk/disclosure_agent.py GATEWAY_URL FILLERS

The agent declares get_weather(city) and FILLERS generated tools (tool_001, tool_002, ...,
each taking an integer x), and talks chat completions to the gateway, which stands in front of
a scripted upstream. The script prints one JSON line: the run's final output, every tool the
agent ran (its own function tools, whichever the model named), the names of the tool calls in
the run's items, how many tools the agent declared, or the exception that ended the run. The
assertions are in the Rust test; this script only reports.
"""

import asyncio
import json
import sys

from agents import (
    Agent,
    FunctionTool,
    OpenAIChatCompletionsModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

ran = []


@function_tool
def get_weather(city: str) -> str:
    """Reports the weather of a city."""
    ran.append({"name": "get_weather", "city": city})
    return f"Sunny in {city}."


def filler(n):
    """The nth generated tool: records that it ran, as get_weather does."""
    name = f"tool_{n:03}"

    async def invoke(_context, arguments):
        ran.append({"name": name, "arguments": arguments})
        return f"Task {n} done."

    return FunctionTool(
        name=name,
        description=f"Does task number {n}. Rarely needed.",
        params_json_schema={
            "type": "object",
            "properties": {"x": {"type": "integer"}},
            "required": ["x"],
            "additionalProperties": False,
        },
        on_invoke_tool=invoke,
    )


def call_names(items):
    """The names of the tool calls among a run's items."""
    names = []
    for item in items:
        if getattr(item, "type", None) == "tool_call_item":
            raw = item.raw_item
            name = raw.get("name") if isinstance(raw, dict) else getattr(raw, "name", None)
            names.append(name)
    return names


async def main(base, fillers):
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base + "/v1", api_key="sk-client-key", max_retries=0, timeout=30)
    tools = [get_weather] + [filler(n) for n in range(1, fillers + 1)]
    agent = Agent(
        name="weather",
        instructions="Answer with the weather.",
        tools=tools,
        model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
    )
    seen = {"output": None, "ran": ran, "calls": None, "declared": len(tools), "error": None}
    try:
        result = await Runner.run(agent, "Weather in Paris, please.")
        seen["output"] = result.final_output
        seen["calls"] = call_names(result.new_items)
    except Exception as error:  # the test reads which exception ended the run
        seen["error"] = {"class": type(error).__name__, "message": str(error)[:500]}
    print(json.dumps(seen))


asyncio.run(main(sys.argv[1], int(sys.argv[2])))
