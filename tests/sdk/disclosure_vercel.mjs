// A multi-step run of the Vercel AI SDK (`ai` with the `@ai-sdk/openai` chat provider) with many
// tools, through a toolgate route with tool_disclosure: the Node driver of
// tests/gateway/disclosure/clients.rs.
//
// Usage (an ES module resolving `ai` and `@ai-sdk/openai` from .ci/frameworks/node_modules, as
// the test runs it): cd .ci/frameworks && node --input-type=module -e "$(cat THIS_FILE)" GATEWAY_URL FILLERS
//
// The run declares get_weather(city) and FILLERS generated tools (tool_001, tool_002, ..., each
// taking an integer x) and lets the SDK loop until the model answers without a call. It prints
// one JSON line: the final text, every tool the SDK executed, the names of the tool calls in the
// run's steps, the tool errors the SDK recorded (a call of a tool it does not know), how many
// tools it declared, or the error that ended the run. The assertions are in the Rust test; this
// script only reports.

import { createOpenAI } from "@ai-sdk/openai";
import { generateText, jsonSchema, stepCountIs, tool } from "ai";

// The last two arguments: with `-e` there is no script path in argv, with a file there is.
const [base, fillers] = process.argv.slice(-2);

const ran = [];
const tools = {
  get_weather: tool({
    description: "Reports the weather of a city.",
    inputSchema: jsonSchema({
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
      additionalProperties: false,
    }),
    execute: async ({ city }) => {
      ran.push({ name: "get_weather", city });
      return `Sunny in ${city}.`;
    },
  }),
};
for (let n = 1; n <= Number(fillers); n++) {
  const name = `tool_${String(n).padStart(3, "0")}`;
  tools[name] = tool({
    description: `Does task number ${n}. Rarely needed.`,
    inputSchema: jsonSchema({
      type: "object",
      properties: { x: { type: "integer" } },
      required: ["x"],
      additionalProperties: false,
    }),
    execute: async (input) => {
      ran.push({ name, input });
      return `Task ${n} done.`;
    },
  });
}

const openai = createOpenAI({ baseURL: `${base}/v1`, apiKey: "sk-client-key" });
const seen = {
  output: null,
  ran,
  calls: null,
  tool_errors: null,
  declared: Object.keys(tools).length,
  error: null,
};
try {
  const result = await generateText({
    model: openai.chat("gpt-4o-mini"),
    system: "Answer with the weather.",
    prompt: "Weather in Paris, please.",
    tools,
    stopWhen: stepCountIs(5),
    maxRetries: 0,
  });
  seen.output = result.text;
  seen.calls = result.steps.flatMap((step) => step.toolCalls.map((call) => call.toolName));
  seen.tool_errors = result.steps.flatMap((step) =>
    step.content
      .filter((part) => part.type === "tool-error")
      .map((part) => ({ tool: part.toolName, error: String(part.error) })),
  );
} catch (error) {
  // the test reads which error ended the run
  seen.error = { class: error?.name ?? typeof error, message: String(error).slice(0, 500) };
}
console.log(JSON.stringify(seen));
