//! The soak's clients of big answers: slow readers, who must get all of a 4–8 MiB answer read
//! 64 KiB at a time, and stalled clients, who stop reading and must be let go.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use toolgate_bench::big_answers;
use toolgate_bench::raw_http::{self, Ending};

use crate::{
    BIG_MAX, BIG_MIN, Random, SLOW_DEADLINE, SLOW_PIECE, SLOW_RECEIVE_BUFFER, STALL, STALL_DRAIN,
    STALL_RECEIVE_BUFFER, Tally, clip, keep_example,
};

/// The request for a big answer on `/big`: `size` bytes of text, whole or streamed.
fn big_request(size: usize, stream: bool) -> Vec<u8> {
    let body = format!(
        r#"{{"model":"m","stream":{stream},"messages":[{{"role":"user","content":"a long story, please"}}]}}"#
    );
    let fault = if stream { "big_sse" } else { "big_json" };
    format!(
        "POST /big/v1/chat/completions HTTP/1.1\r\nhost: soak\r\ncontent-type: application/json\r\n\
         x-soak-fault: {fault}\r\nx-soak-size: {size}\r\nconnection: close\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Whether a 200 answer carries all of the text of `size` (as JSON or as a stream, as its
/// content type says).
fn big_answer_whole(answer: &raw_http::RawAnswer, size: usize) -> Result<(), String> {
    if !answer.whole {
        return Err(format!(
            "the body ended after {} bytes, before its framing's end",
            answer.body.len()
        ));
    }
    if answer.trailing > 0 {
        return Err(format!("{} bytes after the body", answer.trailing));
    }
    match answer.header("content-type").unwrap_or_default() {
        kind if kind.contains("event-stream") => big_answers::check_sse(&answer.body, size),
        _ => big_answers::check_json(&answer.body, size),
    }
}

/// A client that reads big answers slowly, one after another until `stop`: each must be whole.
pub async fn slow_reader(listen: SocketAddr, seed: u64, tally: Arc<Tally>, stop: Arc<AtomicBool>) {
    let mut random = Random(0x9E37_79B9_7F4A_7C15 ^ seed);
    while !stop.load(Ordering::Relaxed) {
        let size = BIG_MIN + random.below(BIG_MAX - BIG_MIN + 1);
        let stream = random.below(2) == 1;
        tally.slow_reads.fetch_add(1, Ordering::Relaxed);
        let began = Instant::now();
        let (counter, trouble) = match slow_read(listen, size, stream, &mut random).await {
            Ok(()) => {
                tally.slow_bytes.fetch_add(size as u64, Ordering::Relaxed);
                (&tally.slow_whole, None)
            }
            Err((status, why)) if status != 200 && status != 0 => (
                &tally.slow_not_ok,
                Some(format!("answered {status}: {why}")),
            ),
            Err((_, why)) => (&tally.slow_cut, Some(why)),
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if let Some(trouble) = trouble {
            keep_example(
                &tally.slow_examples,
                format!(
                    "{size} bytes stream={stream}, after {:.1} s: {trouble}",
                    began.elapsed().as_secs_f64()
                ),
            )
            .await;
        }
    }
}

/// One big answer read 64 KiB at a time with a pause of 20–30 ms after each read; `Err` with
/// the status (0 without one) and what was wrong.
async fn slow_read(
    listen: SocketAddr,
    size: usize,
    stream: bool,
    random: &mut Random,
) -> Result<(), (u16, String)> {
    let mut socket = raw_http::connect_with_receive_buffer(listen, SLOW_RECEIVE_BUFFER)
        .await
        .map_err(|error| (0, format!("connect: {error}")))?;
    socket
        .write_all(&big_request(size, stream))
        .await
        .map_err(|error| (0, format!("write: {error}")))?;
    let deadline = tokio::time::Instant::now() + SLOW_DEADLINE;
    let pause = || Duration::from_millis(20 + random.below(11) as u64);
    let (bytes, ending) = raw_http::read_paced(&mut socket, SLOW_PIECE, pause, deadline).await;
    let answer = raw_http::parse(&bytes).map_err(|why| (0, format!("{why} ({ending:?})")))?;
    if answer.status != 200 {
        return Err((answer.status, clip(&String::from_utf8_lossy(&answer.body))));
    }
    if ending == Ending::Deadline {
        return Err((200, format!("no end within {}s", SLOW_DEADLINE.as_secs())));
    }
    big_answer_whole(&answer, size).map_err(|why| (200, format!("{why} ({ending:?})")))
}

/// A client that asks for a big answer and stops reading, one after another until `stop`: the
/// gateway must end the connection before the answer is all written.
pub async fn stalled_client(
    listen: SocketAddr,
    seed: u64,
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
) {
    let mut random = Random(0x9E37_79B9_7F4A_7C15 ^ seed);
    while !stop.load(Ordering::Relaxed) {
        let stream = random.below(2) == 1;
        tally.stalled.fetch_add(1, Ordering::Relaxed);
        match stall(listen, BIG_MAX, stream).await {
            Ok(()) => {
                tally.stalled_let_go.fetch_add(1, Ordering::Relaxed);
            }
            Err(why) => {
                tally.stalled_kept.fetch_add(1, Ordering::Relaxed);
                keep_example(&tally.stalled_examples, format!("stream={stream}: {why}")).await;
            }
        }
    }
}

/// Asks for `size` bytes, reads nothing for [`STALL`], then drains: `Ok` when the connection
/// ended before the answer did.
async fn stall(listen: SocketAddr, size: usize, stream: bool) -> Result<(), String> {
    let mut socket = raw_http::connect_with_receive_buffer(listen, STALL_RECEIVE_BUFFER)
        .await
        .map_err(|error| format!("connect: {error}"))?;
    socket
        .write_all(&big_request(size, stream))
        .await
        .map_err(|error| format!("write: {error}"))?;
    tokio::time::sleep(STALL).await;
    let deadline = tokio::time::Instant::now() + STALL_DRAIN;
    let (bytes, ending) =
        raw_http::read_paced(&mut socket, 256 * 1024, || Duration::ZERO, deadline).await;
    if ending == Ending::Deadline {
        return Err(format!(
            "the connection had not ended {}s after the client read again ({} bytes)",
            STALL_DRAIN.as_secs(),
            bytes.len()
        ));
    }
    let Ok(answer) = raw_http::parse(&bytes) else {
        return Ok(());
    };
    let complete = match answer.status {
        200 => big_answer_whole(&answer, size).is_ok(),
        _ => answer.whole,
    };
    match complete {
        true => Err(format!(
            "a whole {} answer ({} bytes) after {}s without reading",
            answer.status,
            bytes.len(),
            STALL.as_secs()
        )),
        false => Ok(()),
    }
}
