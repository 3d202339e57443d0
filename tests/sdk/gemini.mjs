// What a user of Google's Node SDK (@google/genai) sees through toolgate on a Gemini route: the
// Node driver of tests/gateway/gemini.rs, run as an ES module from .ci/frameworks/.
// Arguments: GATEWAY_URL CASES_JSON (as tests/sdk/gemini.py takes them). One JSON line per case:
// the function calls read (also those read before an error), the text, and the error thrown.
import { GoogleGenAI } from "@google/genai";

const [base, casesText] = process.argv.slice(-2);
const ai = new GoogleGenAI({ apiKey: "client-gemini-key", httpOptions: { baseUrl: base, apiVersion: "v1beta" } });

function record(response, seen) {
  for (const call of response.functionCalls ?? []) {
    seen.calls.push({ name: call.name, args: call.args ?? null, id: call.id ?? null });
  }
  for (const candidate of response.candidates ?? []) {
    for (const part of candidate.content?.parts ?? []) {
      if (part.text && !part.thought) seen.text += part.text;
    }
  }
}

for (const c of JSON.parse(casesText)) {
  const seen = { case: c.case, calls: [], text: "", error: null };
  const request = { model: c.model, contents: c.contents, config: { tools: c.tools } };
  try {
    if (c.stream) {
      for await (const chunk of await ai.models.generateContentStream(request)) record(chunk, seen);
    } else {
      record(await ai.models.generateContent(request), seen);
    }
  } catch (error) {
    seen.error = { class: error.constructor.name, status: error.status ?? null, message: String(error.message) };
  }
  console.log(JSON.stringify(seen));
}
