//! What captures and the console cost per exchange (issue 46): the close of one guarded
//! exchange — its audit line, its capture, the console's ring — under `[audit] capture` off,
//! blocked (on an allowed answer: nothing kept) and all (kept in the ring); the steps of a kept
//! capture; and the console's ring with no live subscriber and with one. The bodies are the
//! load benchmark's: the 10-tool chat request and the 2-call answer.
//! Run: `cargo bench --bench capture --features microbench`.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use toolgate::microbench::CloseCase;
use toolgate_formats::WireFormat;

// The requests and answers of bench/ (one definition of the traffic for load and micro runs);
// this target uses part of it.
#[allow(dead_code)]
#[path = "../bench/src/workload.rs"]
mod workload;

use workload::{AnswerSpec, RequestSpec};

fn bodies() -> (bytes::Bytes, bytes::Bytes) {
    (
        workload::request_body(RequestSpec::default()),
        workload::completion(AnswerSpec::default()),
    )
}

fn case(capture: &str) -> CloseCase {
    let (request, answer) = bodies();
    match CloseCase::new(capture, request, answer) {
        Ok(case) => case,
        Err(error) => panic!("the benchmark's configuration loads: {error}"),
    }
}

/// The close, per setting: the exchange is prepared outside the timing, as `proxy.rs` leaves
/// it, and dropped outside it.
fn close(c: &mut Criterion) {
    let mut group = c.benchmark_group("capture/close");
    for (label, capture, kept) in [
        ("off", "off", false),
        ("blocked_none_blocked", "blocked", false),
        ("all", "all", true),
    ] {
        let case = case(capture);
        let mut probe = case.exchange().expect("an exchange");
        assert!(case.close(&mut probe) > 0, "an audit line");
        assert_eq!(
            case.captured() == 1,
            kept,
            "{label}: kept as the setting says"
        );
        group.bench_function(label, |b| {
            b.iter_batched_ref(
                || case.exchange().expect("an exchange"),
                |exchange| case.close(black_box(exchange)),
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

/// What a kept capture does beyond sharing the bodies it already holds: the answer read again
/// for its calls (to pass them through the route's redactions), and the two bodies copied into
/// the record's text.
fn kept_steps(c: &mut Criterion) {
    let (request, answer) = bodies();
    let mut group = c.benchmark_group("capture/kept_steps");
    group.bench_function("answer_read_for_redaction", |b| {
        b.iter(|| {
            toolgate_formats::answer::read_answer(WireFormat::ChatCompletions, black_box(&answer))
        })
    });
    group.bench_function("bodies_copied_as_text", |b| {
        b.iter(|| {
            (
                String::from_utf8_lossy(black_box(&request)).into_owned(),
                String::from_utf8_lossy(black_box(&answer)).into_owned(),
            )
        })
    });
    group.finish();
}

/// The console's part of every audited exchange: the line listed in its ring of 500, and sent
/// to the consoles watching — none, or one that receives it and frames it as an SSE event.
fn console(c: &mut Criterion) {
    let case = case("off");
    let mut subscriber = case.subscribe();
    let line = case.line().expect("an audit line");
    assert!(subscriber.drain() > 0, "the subscriber gets the line");
    drop(subscriber);
    let id = "bench-0000000000000001";
    let mut group = c.benchmark_group("console/list");
    group.bench_function("no_subscriber", |b| {
        b.iter(|| case.list(black_box(id), black_box(&line)))
    });
    let mut subscriber = case.subscribe();
    group.bench_function("one_subscriber", |b| {
        b.iter(|| {
            case.list(black_box(id), black_box(&line));
            subscriber.drain()
        })
    });
    group.finish();
    let (request, answer) = bodies();
    eprintln!(
        "bodies: request {} B, answer {} B; audit line {} B",
        request.len(),
        answer.len(),
        line.len()
    );
}

criterion_group!(benches, close, kept_steps, console);
criterion_main!(benches);
