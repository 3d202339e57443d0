//! Micro-benchmarks of the tool_selection plugin's `pre_response` stage with a warm schema
//! cache: membership, arguments and JSON Schema checks of an answer's calls against the
//! request's declared tools (judge off), on the load benchmark's own traffic.
//! Run: `cargo bench -p toolgate-tool-selection --bench checks`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use futures_util::FutureExt;
use http::{HeaderMap, StatusCode};
use toolgate_plugin::prometheus_client::registry::Registry;
use toolgate_plugin::{
    ExchangeMeta, Parsed, Plugin, PluginFactory, ResponseEdit, ResponseExchange, ToolRequest,
    ToolResponse, Verdict, WireFormat,
};
use toolgate_tool_selection::ToolSelectionFactory;

// The requests and answers of bench/ (one definition of the traffic for load and micro runs);
// this target uses part of it.
#[allow(dead_code)]
#[path = "../../../bench/src/workload.rs"]
mod workload;

// The least guard, the floor `tool_selection/answer` reads toolgate against (the same one the
// load benchmark's row g runs in a bare hyper hop).
#[path = "../../../bench/src/least_guard.rs"]
mod least_guard;

use least_guard::{Declared, LeastGuard};
use workload::{AnswerSpec, RequestSpec};

/// A request and an answer as the gateway hands them to the plugin.
struct Exchange {
    meta: ExchangeMeta,
    headers: HeaderMap,
    request: Parsed<ToolRequest>,
    response: Parsed<ToolResponse>,
}

impl Exchange {
    fn new(tools: usize, answer: AnswerSpec) -> Exchange {
        let body = workload::request_body(RequestSpec {
            tools,
            ..RequestSpec::default()
        });
        let request = match WireFormat::ChatCompletions.parse_request(body) {
            Ok(request) => Parsed::Parsed(request),
            Err(error) => panic!("the benchmark request does not parse: {error}"),
        };
        let response =
            match WireFormat::ChatCompletions.parse_response(&workload::completion(answer)) {
                Ok(response) => Parsed::Parsed(response),
                Err(error) => panic!("the benchmark answer does not parse: {error}"),
            };
        Exchange {
            meta: toolgate_plugin::testing::meta("/v1/chat/completions"),
            headers: HeaderMap::new(),
            request,
            response,
        }
    }

    fn view(&self) -> ResponseExchange<'_> {
        ResponseExchange {
            meta: &self.meta,
            request_headers: &self.headers,
            request: &self.request,
            status: StatusCode::OK,
            response: &self.response,
            streamed: false,
        }
    }
}

/// Runs `pre_response` to its verdict. Without a judge the stage never waits, so the future is
/// ready on its first poll; a pending one would mean the setup is not what this bench measures.
fn verdict(plugin: &dyn Plugin, exchange: &Exchange) -> Verdict<ResponseEdit> {
    match plugin.pre_response(&exchange.view()).now_or_never() {
        Some(verdict) => verdict,
        None => panic!("pre_response waited: is a judge configured?"),
    }
}

fn plugin() -> Arc<dyn Plugin> {
    let factory = ToolSelectionFactory::new(
        &mut Registry::default(),
        toolgate_plugin::schema::SchemaChecker::standalone(),
    );
    match factory.build(
        &serde_json::json!({}),
        &toolgate_plugin::BuildContext::default(),
    ) {
        Ok(plugin) => plugin,
        Err(error) => panic!("default settings refused: {error}"),
    }
}

fn pre_response(c: &mut Criterion) {
    let plugin = plugin();
    let mut group = c.benchmark_group("tool_selection/pre_response");
    let cases = [
        ("2_calls_10_tools", 10, 2),
        ("16_calls_10_tools", 10, 16),
        ("2_calls_1000_tools", 1000, 2),
    ];
    for (name, tools, calls) in cases {
        let exchange = Exchange::new(
            tools,
            AnswerSpec {
                calls,
                ..AnswerSpec::default()
            },
        );
        // Warms the schema cache and checks the answer is allowed, as in the load runs.
        assert!(matches!(
            verdict(plugin.as_ref(), &exchange),
            Verdict::Continue
        ));
        group.throughput(Throughput::Elements(calls as u64));
        group.bench_function(name, |b| {
            b.iter(|| verdict(plugin.as_ref(), black_box(&exchange)))
        });
    }
    let blocked = Exchange::new(
        10,
        AnswerSpec {
            undeclared: true,
            ..AnswerSpec::default()
        },
    );
    assert!(matches!(
        verdict(plugin.as_ref(), &blocked),
        Verdict::Block(_)
    ));
    group.throughput(Throughput::Elements(2));
    group.bench_function("2_calls_one_undeclared_blocked", |b| {
        b.iter(|| verdict(plugin.as_ref(), black_box(&blocked)))
    });
    group.finish();
}

/// Everything the plugin side costs per exchange: read the request's tools and the answer's
/// calls from their bytes, then check.
fn parse_and_check(c: &mut Criterion) {
    let plugin = plugin();
    let body = workload::request_body(RequestSpec::default());
    let answer = workload::completion(AnswerSpec::default());
    let mut exchange = Exchange::new(10, AnswerSpec::default());
    let mut group = c.benchmark_group("tool_selection/exchange");
    group.throughput(Throughput::Bytes((body.len() + answer.len()) as u64));
    group.bench_function("parse_request_response_and_check_2_calls_10_tools", |b| {
        b.iter(|| {
            if let Ok(request) = WireFormat::ChatCompletions.parse_request(body.clone()) {
                exchange.request = Parsed::Parsed(request);
            }
            if let Ok(response) = WireFormat::ChatCompletions.parse_response(&answer) {
                exchange.response = Parsed::Parsed(response);
            }
            verdict(plugin.as_ref(), black_box(&exchange))
        })
    });
    group.finish();
}

/// The answer's side of a guarded exchange, toolgate's against the floor: the least a guard
/// built on serde_json and jsonschema does with the same answer. The floor reads only each
/// call's name and arguments into structs of its own, parses the arguments, and asks the
/// validator it compiled for that schema text (warm, as toolgate's cache is) whether they are
/// valid; toolgate reads the answer as its
/// guard must (closed on doubt, every format's calls field) and runs `pre_response` (the
/// membership, arguments and schema checks). The request's declared tools are given to both.
fn answer_against_the_floor(c: &mut Criterion) {
    let plugin = plugin();
    let answer = workload::completion(AnswerSpec::default());
    let mut exchange = Exchange::new(10, AnswerSpec::default());
    let request = workload::request_body(RequestSpec::default());
    let declared = Declared::read(&request).expect("the benchmark request declares tools");
    let floor = LeastGuard::default();
    assert_eq!(floor.checked_calls(&declared, &answer), Some(2));
    let mut group = c.benchmark_group("tool_selection/answer");
    group.throughput(Throughput::Bytes(answer.len() as u64));
    group.bench_function("toolgate_read_and_check_2_calls", |b| {
        b.iter(|| {
            let read =
                toolgate_formats_answer(black_box(&answer)).expect("the benchmark answer reads");
            exchange.response = Parsed::Parsed(read);
            verdict(plugin.as_ref(), &exchange)
        })
    });
    group.bench_function("floor_serde_jsonschema_2_calls", |b| {
        b.iter(|| floor.checked_calls(&declared, black_box(&answer)))
    });
    group.finish();
}

fn toolgate_formats_answer(body: &[u8]) -> Result<ToolResponse, toolgate_plugin::ParseError> {
    toolgate_formats::answer::read_answer(WireFormat::ChatCompletions, body)
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
    targets = pre_response, parse_and_check, answer_against_the_floor
}
criterion_main!(benches);
