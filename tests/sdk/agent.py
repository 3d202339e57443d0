"""An agent loop of the OpenAI Agents SDK (`openai-agents` on PyPI) through toolgate: the driver
of tests/gateway/on_block/agents.rs.

Usage: python3 tests/sdk/agent.py GATEWAY_URL

The agent has one tool, get_weather(city), and talks chat completions to the gateway, which
stands in front of a scripted upstream. The script prints one JSON line: the run's final
output and the tool calls the agent ran, or the exception that ended the run. The assertions
are in the Rust test; this script only reports.
"""

import asyncio
import json
import sys

from agents import Agent, OpenAIChatCompletionsModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI

ran = []


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    ran.append({"name": "get_weather", "city": city})
    return f"Sunny in {city}."


async def main(base):
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=base + "/v1", api_key="sk-client-key", max_retries=0, timeout=30)
    agent = Agent(
        name="weather",
        instructions="Answer with the weather.",
        tools=[get_weather],
        model=OpenAIChatCompletionsModel(model="gpt-4o-mini", openai_client=client),
    )
    seen = {"output": None, "ran": ran, "error": None}
    try:
        result = await Runner.run(agent, "Weather in Paris, please.")
        seen["output"] = result.final_output
    except Exception as error:  # the test reads which exception ended the run
        seen["error"] = {"class": type(error).__name__, "message": str(error)[:500]}
    print(json.dumps(seen))


asyncio.run(main(sys.argv[1]))
