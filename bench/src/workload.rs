//! The traffic of the benchmark: realistic tool declarations (10 hand-written schemas, then as
//! many generated ones as a curve asks for), chat requests that declare them, and the upstream's
//! answers — a `chat.completion` with N tool calls, or the same answer as an SSE stream.

use bytes::Bytes;
use serde_json::{Value, json};

/// The model every request and answer names.
pub const MODEL: &str = "gpt-4o-2024-08-06";

/// Ten tools an office/ops agent would declare, with the kind of schemas real clients send:
/// enums, patterns, bounds, nested arrays of objects, `additionalProperties: false`.
pub fn realistic_tools() -> Vec<Value> {
    vec![
        function(
            "get_weather",
            "Get the current weather and a forecast for a city.",
            json!({"type": "object", "properties": {
                "city": {"type": "string", "minLength": 1, "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "days": {"type": "integer", "minimum": 1, "maximum": 14}},
              "required": ["city"], "additionalProperties": false}),
        ),
        function(
            "send_email",
            "Send an email on behalf of the user.",
            json!({"type": "object", "properties": {
                "to": {"type": "array", "items": {"type": "string", "format": "email"}, "minItems": 1},
                "cc": {"type": "array", "items": {"type": "string", "format": "email"}},
                "subject": {"type": "string", "maxLength": 200},
                "body": {"type": "string"},
                "priority": {"type": "string", "enum": ["low", "normal", "high"]}},
              "required": ["to", "subject", "body"], "additionalProperties": false}),
        ),
        function(
            "search_web",
            "Search the web and return the top results.",
            json!({"type": "object", "properties": {
                "query": {"type": "string", "minLength": 1, "maxLength": 400},
                "max_results": {"type": "integer", "minimum": 1, "maximum": 50},
                "site": {"type": "string", "description": "Restrict to one domain"},
                "recency": {"type": "string", "enum": ["day", "week", "month", "any"]}},
              "required": ["query"], "additionalProperties": false}),
        ),
        function(
            "create_calendar_event",
            "Create an event in the user's calendar and invite attendees.",
            json!({"type": "object", "properties": {
                "title": {"type": "string", "minLength": 1, "maxLength": 120},
                "start": {"type": "string", "format": "date-time"},
                "end": {"type": "string", "format": "date-time"},
                "attendees": {"type": "array", "items": {"type": "object", "properties": {
                    "email": {"type": "string", "format": "email"},
                    "optional": {"type": "boolean"}},
                  "required": ["email"], "additionalProperties": false}},
                "location": {"type": "string"},
                "reminder_minutes": {"type": "integer", "minimum": 0, "maximum": 10080}},
              "required": ["title", "start", "end"], "additionalProperties": false}),
        ),
        function(
            "query_database",
            "Run a read-only SQL query against the analytics warehouse.",
            json!({"type": "object", "properties": {
                "sql": {"type": "string", "pattern": "^\\s*(SELECT|WITH)\\b", "maxLength": 4000},
                "params": {"type": "array", "items": {"type": ["string", "number", "boolean", "null"]}},
                "database": {"type": "string", "enum": ["analytics", "billing", "crm"]},
                "timeout_ms": {"type": "integer", "minimum": 100, "maximum": 60000}},
              "required": ["sql", "database"], "additionalProperties": false}),
        ),
        function(
            "create_ticket",
            "Open a ticket in the issue tracker.",
            json!({"type": "object", "properties": {
                "project": {"type": "string", "pattern": "^[A-Z]{2,10}$"},
                "title": {"type": "string", "minLength": 5, "maxLength": 200},
                "description": {"type": "string"},
                "priority": {"type": "string", "enum": ["P0", "P1", "P2", "P3"]},
                "labels": {"type": "array", "items": {"type": "string"}, "uniqueItems": true, "maxItems": 10},
                "assignee": {"type": "string"}},
              "required": ["project", "title", "priority"], "additionalProperties": false}),
        ),
        function(
            "transfer_funds",
            "Transfer money from one of the company's accounts to a beneficiary. Irreversible.",
            json!({"type": "object", "properties": {
                "amount": {"type": "number", "minimum": 0.01, "maximum": 1000000},
                "currency": {"type": "string", "enum": ["EUR", "USD", "GBP", "CHF"]},
                "from_account": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$"},
                "to_account": {"type": "string", "pattern": "^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$"},
                "beneficiary_name": {"type": "string", "minLength": 1, "maxLength": 70},
                "reference": {"type": "string", "maxLength": 140}},
              "required": ["amount", "currency", "from_account", "to_account", "beneficiary_name"],
              "additionalProperties": false}),
        ),
        function(
            "read_file",
            "Read a file from the project workspace.",
            json!({"type": "object", "properties": {
                "path": {"type": "string", "pattern": "^/"},
                "encoding": {"type": "string", "enum": ["utf-8", "base64"]},
                "max_bytes": {"type": "integer", "minimum": 1, "maximum": 1048576}},
              "required": ["path"], "additionalProperties": false}),
        ),
        function(
            "translate_text",
            "Translate text between two languages.",
            json!({"type": "object", "properties": {
                "text": {"type": "string", "minLength": 1},
                "source_language": {"type": "string", "pattern": "^[a-z]{2}$"},
                "target_language": {"type": "string", "pattern": "^[a-z]{2}$"},
                "formality": {"type": "string", "enum": ["default", "more", "less"]}},
              "required": ["text", "target_language"], "additionalProperties": false}),
        ),
        function(
            "get_stock_quote",
            "Get the latest quote for a listed company.",
            json!({"type": "object", "properties": {
                "symbol": {"type": "string", "pattern": "^[A-Z.]{1,6}$"},
                "exchange": {"type": "string", "enum": ["NYSE", "NASDAQ", "LSE", "XETRA"]},
                "fields": {"type": "array", "items": {"type": "string",
                    "enum": ["price", "change", "volume", "market_cap", "pe_ratio"]}}},
              "required": ["symbol"], "additionalProperties": false}),
        ),
    ]
}

/// Arguments the model passes to each of [`realistic_tools`], in the same order; each is valid
/// against its tool's schema, so an allowed exchange exercises every schema check.
pub const REALISTIC_ARGUMENTS: [&str; 10] = [
    r#"{"city":"Paris","unit":"celsius","days":3}"#,
    r#"{"to":["bob@example.com"],"cc":["carol@example.com"],"subject":"Quarterly report","body":"Hi Bob, the Q3 report is attached. Revenue is up 12% quarter on quarter.","priority":"normal"}"#,
    r#"{"query":"EU AI Act obligations for general-purpose models","max_results":5,"recency":"month"}"#,
    r#"{"title":"Q3 review","start":"2025-10-02T14:00:00Z","end":"2025-10-02T15:00:00Z","attendees":[{"email":"bob@example.com"},{"email":"dan@example.com","optional":true}],"reminder_minutes":15}"#,
    r#"{"sql":"SELECT region, sum(amount) FROM orders WHERE created_at >= $1 GROUP BY region","params":["2025-07-01"],"database":"analytics","timeout_ms":5000}"#,
    r#"{"project":"OPS","title":"Disk usage above 90% on db-3","description":"Alert fired at 03:12 UTC.","priority":"P2","labels":["infra","disk"]}"#,
    r#"{"amount":1250.0,"currency":"EUR","from_account":"DE89370400440532013000","to_account":"DE44500105175407324931","beneficiary_name":"Acme Logistics GmbH","reference":"INV-2025-0412"}"#,
    r#"{"path":"/srv/app/config/settings.yaml","encoding":"utf-8","max_bytes":65536}"#,
    r#"{"text":"The shipment leaves Hamburg on Monday.","source_language":"en","target_language":"fr","formality":"more"}"#,
    r#"{"symbol":"MSFT","exchange":"NASDAQ","fields":["price","change","volume"]}"#,
];

fn function(name: &str, description: &str, parameters: Value) -> Value {
    json!({"type": "function", "function": {
        "name": name, "description": description, "parameters": parameters}})
}

const VERBS: [&str; 8] = [
    "get", "list", "create", "update", "archive", "export", "sync", "approve",
];
const NOUNS: [&str; 12] = [
    "invoice",
    "customer",
    "order",
    "shipment",
    "contract",
    "report",
    "device",
    "user",
    "payment",
    "project",
    "warehouse",
    "campaign",
];

/// A generated tool, distinct in name and schema text from every other (so a cache keyed by
/// schema text holds one entry per tool, as it would for a real agent's tool set).
fn generated_tool(index: usize) -> Value {
    let verb = VERBS[index % VERBS.len()];
    let noun = NOUNS[(index / VERBS.len()) % NOUNS.len()];
    let name = format!("{verb}_{noun}_{index:04}");
    let id_field = format!("{noun}_id");
    function(
        &name,
        &format!("{verb} a {noun} record in system {index} and return the result as JSON."),
        json!({"type": "object", "properties": {
            id_field.clone(): {"type": "string", "pattern": format!("^{}-[0-9]{{4,12}}$", &noun[..3].to_uppercase())},
            "fields": {"type": "array", "items": {"type": "string"}, "maxItems": 20 + index % 7},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100 + index},
            "status": {"type": "string", "enum": ["open", "closed", "pending", format!("custom_{index}")]},
            "dry_run": {"type": "boolean"}},
          "required": [id_field], "additionalProperties": false}),
    )
}

/// `count` declared tools: the realistic ten first, then generated ones.
pub fn tools(count: usize) -> Vec<Value> {
    let mut tools = realistic_tools();
    tools.truncate(count);
    tools.extend((tools.len()..count).map(generated_tool));
    tools
}

/// What a benchmark request declares and carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestSpec {
    pub tools: usize,
    /// Bytes of conversation to carry beyond the base exchange (0: the base exchange only).
    pub message_bytes: usize,
    /// Bytes of an agent's turns to carry beyond the base exchange: calls and their results,
    /// JSON documents in strings ([`agent_turns`]); 0: none.
    pub agent_turn_bytes: usize,
    pub stream: bool,
}

impl Default for RequestSpec {
    fn default() -> Self {
        RequestSpec {
            tools: 10,
            message_bytes: 0,
            agent_turn_bytes: 0,
            stream: false,
        }
    }
}

/// The conversation the table's `+50 KB history` rows carry beyond its request: real agent
/// requests are mostly history, which the guard only skips.
pub const HISTORY_BYTES: usize = 50_000;

/// The agent turns the table's `+50 KB` and `+200 KB agent turns` rows carry beyond its request:
/// what a working agent sends, tool results as escaped JSON, which the guard must read through.
pub const AGENT_TURN_BYTES: [usize; 2] = [50_000, 200_000];

const FILLER: &str = "Here is the status of the migration so far: the orders table is copied, \
    the indexes are rebuilding, and the replicas are 3 seconds behind the primary. ";

/// A chat request body: a short realistic conversation (with an earlier tool call and its
/// result), padded with turns up to `message_bytes`, declaring `tools` tools.
pub fn request_body(spec: RequestSpec) -> Bytes {
    let mut messages = vec![
        json!({"role": "system", "content": "You are the operations assistant of Northwind Ltd. \
            Use the tools to answer; confirm amounts and recipients exactly as the user states them."}),
        json!({"role": "user", "content": "What's the weather in Paris this week, and email Bob the Q3 report?"}),
        json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_prev_1", "type": "function",
            "function": {"name": "search_web", "arguments": "{\"query\":\"Q3 report location\"}"}}]}),
        json!({"role": "tool", "tool_call_id": "call_prev_1",
            "content": "[{\"title\": \"Q3 report\", \"url\": \"https://intranet.example/q3.pdf\"}]"}),
    ];
    messages.extend(agent_turns(spec.agent_turn_bytes));
    let mut padded = 0;
    let mut turn = 0;
    while padded < spec.message_bytes {
        let role = if turn % 2 == 0 { "user" } else { "assistant" };
        let want = (spec.message_bytes - padded).min(8 * 1024);
        let content: String = FILLER.chars().cycle().take(want.max(1)).collect();
        padded += content.len() + 32;
        messages.push(json!({"role": role, "content": content}));
        turn += 1;
    }
    messages.push(json!({"role": "user", "content": [{"type": "text",
        "text": "Go ahead: check the weather and send the email."}]}));
    let body = json!({
        "model": MODEL,
        "stream": spec.stream,
        "messages": messages,
        "tools": tools(spec.tools),
        "tool_choice": "auto",
        "temperature": 0.2,
        "parallel_tool_calls": true,
    });
    Bytes::from(body.to_string())
}

/// `bytes` (or a little more) of an agent's turns, as its client sends them back each turn: an
/// assistant message calling a tool, its arguments JSON text in a string, then the tool's result,
/// a JSON document serialized into the message's `content` — search results, database rows,
/// source files and JSON files read whole (a document in a string in a string). So quotes,
/// backslashes and newlines are escaped every few bytes, as in real agent traffic. Deterministic:
/// each turn is a function of its number.
pub fn agent_turns(bytes: usize) -> Vec<Value> {
    let mut messages = Vec::new();
    let mut written = 0;
    let mut turn = 0;
    while written < bytes {
        let (name, arguments, result) = match turn % 4 {
            0 => search_results(turn),
            1 => source_file(turn),
            2 => database_rows(turn),
            _ => json_file(turn),
        };
        let id = format!("call_{turn:03}_q7Lm2xVb");
        let call = json!({"role": "assistant", "content": null, "tool_calls": [{"id": id,
            "type": "function", "function": {"name": name, "arguments": arguments.to_string()}}]});
        let answer = json!({"role": "tool", "tool_call_id": id, "content": result.to_string()});
        // Each message and the comma before it, as the body writes them.
        written += call.to_string().len() + answer.to_string().len() + 2;
        messages.extend([call, answer]);
        turn += 1;
    }
    messages
}

const TOPICS: [&str; 6] = [
    "replica lag",
    "index rebuild",
    "connection pool",
    "vacuum settings",
    "failover drill",
    "query planner",
];

/// A `search_web` call and its results: titles, URLs with queries, snippets quoting text.
fn search_results(turn: usize) -> (&'static str, Value, Value) {
    let topic = TOPICS[turn % TOPICS.len()];
    let results: Vec<Value> = (0..6)
        .map(|rank| {
            let other = TOPICS[(turn + rank) % TOPICS.len()];
            json!({
                "title": format!("Troubleshooting {other}: a field guide (part {})", rank + 1),
                "url": format!("https://docs.example.org/postgres/{}/{turn}-{rank}?ref=search&lang=en",
                    other.replace(' ', "-")),
                "snippet": format!("When \"{other}\" grows past the threshold, run `SELECT * FROM \
                    pg_stat_replication;` and compare \"sent_lsn\" with \"replay_lsn\" — see \
                    section {turn}.{rank} for the C:\\\\ paths on Windows hosts."),
                "published": format!("2025-{:02}-{:02}T08:{:02}:00Z", 1 + (turn + rank) % 12,
                    1 + (turn * 7 + rank) % 28, (turn * 13 + rank) % 60),
                "score": 0.97 - rank as f64 * 0.07,
            })
        })
        .collect();
    (
        "search_web",
        json!({"query": format!("postgres {topic} runbook"), "max_results": 6, "recency": "month"}),
        json!({"query": format!("postgres {topic} runbook"), "total": 1200 + turn, "results": results}),
    )
}

/// A `read_file` call and a source file read whole: code with strings, escapes and indentation.
fn source_file(turn: usize) -> (&'static str, Value, Value) {
    let path = format!("/srv/app/src/migrate_{turn:03}.py");
    let mut text = format!(
        "\"\"\"Migration step {turn}: copy the orders table in batches.\"\"\"\n\nimport re\nimport json\n\n"
    );
    for step in 0..8 {
        text.push_str(&format!(
            "def batch_{step}(cursor, log):\n    \"\"\"Copy batch {step} and log its \"progress\".\"\"\"\n    \
             pattern = re.compile(r\"^order-(\\d{{4,12}})$\")\n    \
             cursor.execute(\"INSERT INTO orders_new SELECT * FROM orders WHERE id % 8 = {step}\")\n    \
             log.write(json.dumps({{\"step\": {step}, \"rows\": cursor.rowcount, \"path\": \"C:\\\\data\\\\{turn}\"}}) + \"\\n\")\n    \
             return pattern\n\n"
        ));
    }
    let size = text.len();
    (
        "read_file",
        json!({"path": path, "encoding": "utf-8", "max_bytes": 65536}),
        json!({"path": path, "encoding": "utf-8", "size": size, "content": text}),
    )
}

/// A `query_database` call and its rows: many short strings, each quoted.
fn database_rows(turn: usize) -> (&'static str, Value, Value) {
    let regions = ["eu-west", "eu-central", "us-east", "us-west", "ap-south"];
    let rows: Vec<Value> = (0..24)
        .map(|row| {
            json!([
                format!("ORD-{:08}", turn * 1000 + row),
                regions[(turn + row) % regions.len()],
                format!(
                    "{}.{:02}",
                    100 + (turn * 37 + row * 11) % 9000,
                    (row * 7) % 100
                ),
                if row % 3 == 0 { "shipped" } else { "pending" },
                format!(
                    "2025-09-{:02}T{:02}:{:02}:00Z",
                    1 + row % 28,
                    row % 24,
                    (turn + row) % 60
                ),
            ])
        })
        .collect();
    (
        "query_database",
        json!({"sql": "SELECT id, region, amount, status, created_at FROM orders WHERE created_at >= $1 ORDER BY id LIMIT 24",
            "params": [format!("2025-09-{:02}", 1 + turn % 28)], "database": "analytics", "timeout_ms": 5000}),
        json!({"columns": ["id", "region", "amount", "status", "created_at"],
            "row_count": rows.len(), "rows": rows, "elapsed_ms": 12 + turn % 40}),
    )
}

/// A `read_file` call and a JSON file read whole: a document in a string, itself in a string.
fn json_file(turn: usize) -> (&'static str, Value, Value) {
    let path = format!("/srv/app/config/replicas_{turn:03}.json");
    let replicas: Vec<Value> = (0..6)
        .map(|replica| {
            json!({"name": format!("db-{replica}"), "host": format!("10.0.{turn}.{}", 10 + replica),
                "port": 5432, "lag_seconds": (turn + replica) % 5, "tags": ["primary-eu", "ssd"],
                "dsn": format!("postgres://app@10.0.{turn}.{}:5432/orders?sslmode=require", 10 + replica)})
        })
        .collect();
    let document = json!({"version": turn, "replicas": replicas,
        "failover": {"mode": "automatic", "quorum": 2, "notify": ["ops@example.com"]}});
    let text = serde_json::to_string_pretty(&document).unwrap_or_default();
    let size = text.len();
    (
        "read_file",
        json!({"path": path, "encoding": "utf-8", "max_bytes": 65536}),
        json!({"path": path, "encoding": "utf-8", "size": size, "content": text}),
    )
}

/// What the upstream answers: `calls` tool calls cycling over the first `span` realistic tools;
/// with `undeclared`, the first call names a tool no request declares (so a guard must block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerSpec {
    pub calls: usize,
    pub span: usize,
    pub undeclared: bool,
}

impl Default for AnswerSpec {
    fn default() -> Self {
        AnswerSpec {
            calls: 2,
            span: 10,
            undeclared: false,
        }
    }
}

/// The name of a tool that no benchmark request declares.
pub const UNDECLARED_TOOL: &str = "delete_all_backups";

impl AnswerSpec {
    /// `(id, name, arguments)` of each call.
    fn calls(&self) -> Vec<(String, String, &'static str)> {
        let span = self.span.clamp(1, REALISTIC_ARGUMENTS.len());
        let names: Vec<String> = realistic_tools()
            .iter()
            .map(|tool| {
                tool["function"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect();
        (0..self.calls)
            .map(|index| {
                let tool = index % span;
                let name = if self.undeclared && index == 0 {
                    UNDECLARED_TOOL.to_owned()
                } else {
                    names[tool].clone()
                };
                (
                    format!("call_{index:02}_Xk3mQ9vLw2pR7tYb"),
                    name,
                    REALISTIC_ARGUMENTS[tool],
                )
            })
            .collect()
    }
}

const CREATED: u64 = 1_735_689_600;
const COMPLETION_ID: &str = "chatcmpl-BenchQ7x1Hk2TwoCalls";
const TEXT_DELTAS: [&str; 8] = [
    "Let", " me", " check", " the", " weather", " and", " send", " that.",
];

/// A complete `chat.completion` answer.
pub fn completion(spec: AnswerSpec) -> Bytes {
    let tool_calls: Vec<Value> = spec
        .calls()
        .into_iter()
        .map(|(id, name, arguments)| {
            json!({"id": id, "type": "function",
                   "function": {"name": name, "arguments": arguments}})
        })
        .collect();
    let finish = if tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    let body = json!({
        "id": COMPLETION_ID, "object": "chat.completion", "created": CREATED, "model": MODEL,
        "system_fingerprint": "fp_f7d56a8a2c",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": TEXT_DELTAS.concat(),
            "refusal": null, "tool_calls": tool_calls}, "logprobs": null, "finish_reason": finish}],
        "usage": {"prompt_tokens": 1893, "completion_tokens": 96, "total_tokens": 1989,
            "prompt_tokens_details": {"cached_tokens": 1536}}
    });
    Bytes::from(body.to_string())
}

fn chunk(delta: Value, finish_reason: Value) -> Bytes {
    let chunk = json!({
        "id": COMPLETION_ID, "object": "chat.completion.chunk", "created": CREATED, "model": MODEL,
        "system_fingerprint": "fp_f7d56a8a2c",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}]
    });
    event(&chunk.to_string())
}

fn event(data: &str) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
}

/// The opening event: the role, nothing visible yet.
pub fn stream_opening() -> Bytes {
    chunk(
        json!({"role": "assistant", "content": "", "refusal": null}),
        Value::Null,
    )
}

/// A text delta stamped with the time it leaves the upstream (ns since the Unix epoch), in a
/// top-level field every chat client ignores.
pub fn stamped_text_delta(text: &str, sent_ns: u128) -> Bytes {
    let chunk = json!({
        "id": COMPLETION_ID, "object": "chat.completion.chunk", "created": CREATED, "model": MODEL,
        "bench_sent_ns": sent_ns as u64,
        "choices": [{"index": 0, "delta": {"content": text}, "logprobs": null, "finish_reason": null}]
    });
    event(&chunk.to_string())
}

/// The events after the text: each call as a name fragment plus its arguments in slices of
/// about 24 bytes (as real servers stream them), the finish, and `[DONE]`.
pub fn stream_calls_and_end(spec: AnswerSpec) -> Vec<Bytes> {
    let mut events = Vec::new();
    let calls = spec.calls();
    for (index, (id, name, arguments)) in calls.iter().enumerate() {
        events.push(chunk(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                   "function": {"name": name, "arguments": ""}}]}),
            Value::Null,
        ));
        let mut rest = *arguments;
        while !rest.is_empty() {
            let mut cut = rest.len().min(24);
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            let (piece, tail) = rest.split_at(cut);
            events.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                Value::Null,
            ));
            rest = tail;
        }
    }
    let finish = if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    events.push(chunk(json!({}), json!(finish)));
    events.push(event("[DONE]"));
    events
}

/// The whole answer as a stream: opening, text deltas, calls, finish, `[DONE]`, one event each.
pub fn stream_events(spec: AnswerSpec) -> Vec<Bytes> {
    let mut events = vec![stream_opening()];
    events.extend(
        TEXT_DELTAS
            .iter()
            .map(|text| chunk(json!({"content": text}), Value::Null)),
    );
    events.extend(stream_calls_and_end(spec));
    events
}

#[cfg(test)]
mod tests {
    // Paths, not `use`: the criterion benches include this file, and their check builds drop
    // `#[test]` functions, which would leave an import unused.

    #[test]
    fn requests_declare_the_asked_number_of_distinct_tools() {
        for count in [1, 10, 100, 1000] {
            let body: serde_json::Value =
                serde_json::from_slice(&super::request_body(super::RequestSpec {
                    tools: count,
                    ..super::RequestSpec::default()
                }))
                .expect("JSON");
            let tools = body["tools"].as_array().expect("tools");
            assert_eq!(tools.len(), count);
            let mut schemas: Vec<String> = tools
                .iter()
                .map(|tool| tool["function"]["parameters"].to_string())
                .collect();
            schemas.sort();
            schemas.dedup();
            assert_eq!(schemas.len(), count, "schema texts are distinct");
        }
    }

    #[test]
    fn padding_reaches_the_asked_size() {
        let base = super::request_body(super::RequestSpec::default()).len();
        let padded = super::request_body(super::RequestSpec {
            message_bytes: 100_000,
            ..super::RequestSpec::default()
        })
        .len();
        assert!(padded >= base + 100_000, "{padded} vs {base}");
        assert!(padded < base + 110_000, "{padded} vs {base}");
    }

    #[test]
    fn agent_turns_reach_the_asked_size_and_are_the_same_every_time() {
        let base = super::request_body(super::RequestSpec::default()).len();
        for bytes in super::AGENT_TURN_BYTES {
            let spec = super::RequestSpec {
                agent_turn_bytes: bytes,
                ..super::RequestSpec::default()
            };
            let body = super::request_body(spec);
            assert!(body.len() >= base + bytes, "{} vs {base}", body.len());
            assert!(
                body.len() < base + bytes + 5_000,
                "{} vs {base}",
                body.len()
            );
            assert_eq!(body, super::request_body(spec), "deterministic");
        }
    }

    #[test]
    fn agent_turns_are_calls_answered_by_json_documents_in_strings() {
        let turns = super::agent_turns(20_000);
        assert!(
            turns.len() >= 8 && turns.len().is_multiple_of(2),
            "{}",
            turns.len()
        );
        for pair in turns.chunks(2) {
            let call = &pair[0]["tool_calls"][0];
            let arguments = call["function"]["arguments"].as_str().expect("arguments");
            serde_json::from_str::<serde_json::Value>(arguments).expect("arguments are JSON");
            assert_eq!(pair[1]["role"], "tool");
            assert_eq!(pair[1]["tool_call_id"], call["id"]);
            let result = pair[1]["content"].as_str().expect("a string result");
            serde_json::from_str::<serde_json::Value>(result).expect("the result is JSON");
        }
        // Escapes every few bytes: what makes these turns slow to read, unlike prose.
        let text = serde_json::Value::Array(turns).to_string();
        let escapes = text.bytes().filter(|byte| *byte == b'\\').count();
        assert!(escapes * 12 > text.len(), "{escapes} in {}", text.len());
    }

    #[test]
    fn the_stream_carries_the_calls_of_the_completion() {
        let spec = super::AnswerSpec {
            calls: 4,
            ..super::AnswerSpec::default()
        };
        let completion: serde_json::Value =
            serde_json::from_slice(&super::completion(spec)).expect("JSON");
        let calls = completion["choices"][0]["message"]["tool_calls"]
            .as_array()
            .expect("calls");
        let mut arguments = vec![String::new(); calls.len()];
        for event in super::stream_events(spec) {
            let text = std::str::from_utf8(&event).expect("UTF-8");
            let data = text
                .strip_prefix("data: ")
                .and_then(|rest| rest.strip_suffix("\n\n"))
                .expect("one data line");
            if data == "[DONE]" {
                continue;
            }
            let chunk: serde_json::Value = serde_json::from_str(data).expect("JSON chunk");
            for call in chunk["choices"][0]["delta"]["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let index = call["index"].as_u64().expect("index") as usize;
                arguments[index].push_str(call["function"]["arguments"].as_str().unwrap_or(""));
            }
        }
        for (call, streamed) in calls.iter().zip(arguments) {
            assert_eq!(
                call["function"]["arguments"].as_str(),
                Some(streamed.as_str())
            );
        }
    }
}
