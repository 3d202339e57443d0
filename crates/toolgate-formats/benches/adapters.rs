//! Micro-benchmarks of the wire-format adapters on the load benchmark's own traffic: reading the
//! declared tools of a chat request (10 and 1,000 tools), uncached and from the declared-tools
//! cache (a hit: the same `tools` array as an earlier request; misses: a new array each time),
//! the same read behind prose history and behind an agent's turns (escaped JSON), the top-level
//! scan of those bodies beside serde_json's skip, the calls of a 2-call answer,
//! and the SSE parser plus chat stream assembler over the same answer streamed.
//! Run: `cargo bench -p toolgate-formats --bench adapters`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use toolgate_formats::ChatStreamAssembler;
use toolgate_formats::sse::SseParser;
use toolgate_formats::stream::StreamAssembler;
use toolgate_formats::{DeclaredToolsCache, WireFormat};

// The requests and answers of bench/ (one definition of the traffic for load and micro runs);
// this target uses part of it.
#[allow(dead_code)]
#[path = "../../../bench/src/workload.rs"]
mod workload;

use workload::{AnswerSpec, RequestSpec};

fn parse_request(c: &mut Criterion) {
    let mut group = c.benchmark_group("adapters/parse_request");
    for tools in [10, 1000] {
        let body = workload::request_body(RequestSpec {
            tools,
            ..RequestSpec::default()
        });
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_function(format!("{tools}_tools"), |b| {
            b.iter(|| WireFormat::ChatCompletions.parse_request(black_box(body.clone())))
        });
        bench_cached_hit(&mut group, &format!("{tools}_tools_cached"), &body);
    }
    // Every read a first sight: 1,024 requests whose `tools` differ by an 11th tool, read in
    // turn, 4 times as many arrays as the cache has entries, so each read misses and evicts
    // (what a client sending a new array every time costs), against the same reads uncached.
    let body = workload::request_body(RequestSpec::default());
    let bodies: Vec<bytes::Bytes> = (0..1024)
        .map(|n| {
            let text = String::from_utf8(body.to_vec()).expect("the workload is text");
            let tool =
                format!(r#""tools":[{{"type":"function","function":{{"name":"tool_{n}"}}}},"#);
            bytes::Bytes::from(text.replacen(r#""tools":["#, &tool, 1))
        })
        .collect();
    group.throughput(Throughput::Bytes(bodies[0].len() as u64));
    let mut turn = 0;
    group.bench_function("11_tools_rotating", |b| {
        b.iter(|| {
            turn = (turn + 1) % bodies.len();
            WireFormat::ChatCompletions.parse_request(black_box(bodies[turn].clone()))
        })
    });
    let cache = DeclaredToolsCache::new();
    group.bench_function("11_tools_rotating_cached_miss", |b| {
        b.iter(|| {
            turn = (turn + 1) % bodies.len();
            WireFormat::ChatCompletions
                .parse_request_cached(black_box(bodies[turn].clone()), &cache)
        })
    });
    assert_eq!(cache.hits(), 0, "every read missed");
    group.finish();
}

/// A read whose `tools` the cache already holds, as every turn of an agent after its first
/// (1,000 tools are past the cache's entry size: read as uncached).
fn bench_cached_hit(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    body: &bytes::Bytes,
) {
    let cache = DeclaredToolsCache::new();
    let warm = WireFormat::ChatCompletions.parse_request_cached(body.clone(), &cache);
    assert!(warm.is_ok(), "the benchmark request parses");
    let again = WireFormat::ChatCompletions.parse_request_cached(body.clone(), &cache);
    // An array past the entry size is read every time: that read is what is measured then.
    let kept = cache.misses() == 1;
    assert!(again.is_ok() && cache.hits() == u64::from(kept), "{name}");
    group.bench_function(name, |b| {
        b.iter(|| WireFormat::ChatCompletions.parse_request_cached(black_box(body.clone()), &cache))
    });
}

/// The guard's read of a request as agents send it: the same 10 tools behind a growing
/// conversation, which the read must skip (the table's 5.8 KB request, then 50 KB and 1 MB of
/// history), and behind 50 KB of agent turns (calls and escaped JSON results: loadbench's
/// `d50t` row sends the same bytes, so its cached read here is that row's request read alone).
fn read_request_history(c: &mut Criterion) {
    let mut group = c.benchmark_group("adapters/read_request_history");
    let history = |message_bytes| RequestSpec {
        message_bytes,
        ..RequestSpec::default()
    };
    let agent = RequestSpec {
        agent_turn_bytes: workload::AGENT_TURN_BYTES[0],
        ..RequestSpec::default()
    };
    for (label, spec) in [
        ("5.8KB", history(0)),
        ("50KB", history(50_000)),
        ("1MB", history(1_000_000)),
        ("table_50KB_agent_turns", agent),
    ] {
        let body = workload::request_body(spec);
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_function(label, |b| {
            b.iter(|| WireFormat::ChatCompletions.parse_request(black_box(body.clone())))
        });
        bench_cached_hit(&mut group, &format!("{label}_cached"), &body);
    }
    group.finish();
}

/// The scan the cached request read makes of a body's top level, beside serde_json skipping
/// the same body: the table's request (mostly `tools`), 50 KB of plain-text history, and 50 KB
/// of an agent's turns, where escapes are dense — issue 49's body (`50KB_agent_turns`, below)
/// and the table's request with loadbench's 50 KB of agent turns (`table_50KB_agent_turns`,
/// the `d50t` row's bytes).
fn scan(c: &mut Criterion) {
    let mut group = c.benchmark_group("adapters/scan");
    let history = |message_bytes| {
        workload::request_body(RequestSpec {
            message_bytes,
            ..RequestSpec::default()
        })
    };
    let bodies = [
        ("5.8KB", history(0)),
        ("50KB", history(50_000)),
        ("50KB_agent_turns", agent_turns(50_000)),
        (
            "table_50KB_agent_turns",
            workload::request_body(RequestSpec {
                agent_turn_bytes: workload::AGENT_TURN_BYTES[0],
                ..RequestSpec::default()
            }),
        ),
    ];
    for (label, body) in bodies {
        assert!(toolgate_formats::scans_as_object(&body));
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_function(format!("{label}_scan"), |b| {
            b.iter(|| toolgate_formats::scans_as_object(black_box(&body)))
        });
        group.bench_function(format!("{label}_serde_json_skip"), |b| {
            b.iter(|| serde_json::from_slice::<serde::de::IgnoredAny>(black_box(&body)))
        });
    }
    group.finish();
}

/// A chat request whose history is `bytes` of an agent's turns: each a call, its arguments JSON
/// text in a string, and the tool's answer, JSON text again with code in it, so quotes,
/// backslashes and newlines are escaped every few bytes. Issue 49's figures were measured on
/// this body; kept as it is so they compare (loadbench's turns are `workload::agent_turns`).
fn agent_turns(bytes: usize) -> bytes::Bytes {
    let mut messages = Vec::new();
    let mut written = 0;
    for turn in 0.. {
        if written >= bytes {
            break;
        }
        let arguments = serde_json::json!({"path": format!("src/module_{turn}.rs"), "line": turn});
        let result = serde_json::json!({
            "path": format!("src/module_{turn}.rs"),
            "text": "fn main() {\n    println!(\"hello, {}\", name);\n}\n",
            "matches": [{"line": 3, "column": 14, "kind": "call"}],
        });
        let call = serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": format!("call_{turn}"), "type": "function",
            "function": {"name": "read_file", "arguments": arguments.to_string()}}]});
        let answer = serde_json::json!({"role": "tool", "tool_call_id": format!("call_{turn}"),
            "content": result.to_string()});
        written += call.to_string().len() + answer.to_string().len();
        messages.extend([call, answer]);
    }
    let body =
        serde_json::json!({"model": "gpt-4o", "messages": messages, "tools": workload::tools(10)});
    bytes::Bytes::from(body.to_string())
}

fn parse_response(c: &mut Criterion) {
    let mut group = c.benchmark_group("adapters/parse_response");
    for calls in [2, 16] {
        let body = workload::completion(AnswerSpec {
            calls,
            ..AnswerSpec::default()
        });
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_function(format!("{calls}_calls"), |b| {
            b.iter(|| WireFormat::ChatCompletions.parse_response(black_box(&body)))
        });
        // What a guarded route reads: the answer's shape first, then its format.
        group.bench_function(format!("{calls}_calls_guarded"), |b| {
            b.iter(|| {
                toolgate_formats::answer::read_answer(WireFormat::ChatCompletions, black_box(&body))
            })
        });
    }
    group.finish();
}

/// What the stream guard does with an answer: split it into events, classify each, rebuild the
/// calls. `event_chunks` feeds one event per push (how an upstream that flushes per token
/// arrives); `one_chunk` feeds the whole stream at once.
fn sse_reassembly(c: &mut Criterion) {
    let events = workload::stream_events(AnswerSpec::default());
    let whole: Vec<u8> = events.iter().flat_map(|event| event.to_vec()).collect();
    let mut group = c.benchmark_group("adapters/sse_assemble_2_calls");
    group.throughput(Throughput::Bytes(whole.len() as u64));
    group.bench_function("event_chunks", |b| {
        b.iter(|| {
            let mut parser = SseParser::new();
            let mut assembler = ChatStreamAssembler::new();
            for chunk in &events {
                for event in parser.push(black_box(chunk)) {
                    black_box(assembler.observe(&event));
                }
            }
            assembler.take_calls()
        })
    });
    group.bench_function("one_chunk", |b| {
        b.iter(|| {
            let mut parser = SseParser::new();
            let mut assembler = ChatStreamAssembler::new();
            for event in parser.push(black_box(&whole)) {
                black_box(assembler.observe(&event));
            }
            assembler.take_calls()
        })
    });
    group.bench_function("parser_only", |b| {
        b.iter(|| {
            let mut parser = SseParser::new();
            parser.push(black_box(&whole)).len()
        })
    });
    group.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(50)
}

criterion_group! {
    name = benches;
    config = config();
    targets = parse_request, read_request_history, scan, parse_response, sse_reassembly
}
criterion_main!(benches);
