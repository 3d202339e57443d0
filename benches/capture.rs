//! What captures and the console cost per exchange (issue 46): the close of one guarded
//! exchange — its audit line, its capture, the console's ring — under `[audit] capture` off,
//! blocked (on an allowed answer: nothing kept) and all (kept in the ring), with audit output on
//! and off; and the console's ring with no live subscriber and with one. The bodies are the
//! load benchmark's: the 10-tool chat request and the 2-call answer.
//! Run: `cargo bench --bench capture --features microbench`.

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use toolgate::microbench::CloseCase;

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

fn case(capture: &str, audit_on: bool) -> CloseCase {
    let (request, answer) = bodies();
    match CloseCase::new(capture, audit_on, request, answer) {
        Ok(case) => case,
        Err(error) => panic!("the benchmark's configuration loads: {error}"),
    }
}

/// The close, per setting: the exchange is prepared outside the timing, as `proxy.rs` leaves
/// it, and dropped outside it.
fn close(c: &mut Criterion) {
    let mut group = c.benchmark_group("capture/close");
    for (label, capture, audit_on, kept) in [
        ("off", "off", true, false),
        ("blocked_none_blocked", "blocked", true, false),
        ("all", "all", true, true),
        ("no_audit/blocked_none_blocked", "blocked", false, false),
        ("no_audit/all", "all", false, true),
    ] {
        let case = case(capture, audit_on);
        let mut probe = case.exchange().expect("an exchange");
        assert_eq!(
            case.close(&mut probe) > 0,
            audit_on || kept,
            "{label}: a line where the output or a capture wants one"
        );
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

/// The console's part of every audited exchange: the line listed in its ring of 500, and sent
/// to the consoles watching — none, or one that receives it and frames it as an SSE event.
fn console(c: &mut Criterion) {
    let case = case("off", true);
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

criterion_group!(benches, close, console);
criterion_main!(benches);
