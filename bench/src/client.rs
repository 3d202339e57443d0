//! The driver's own HTTP/1.1 client, for what a generic load generator cannot measure: closed-loop
//! runs whose cost is read off the server's CPU time, SSE streams whose text deltas are timed
//! from the upstream's send stamp to their arrival, and a thousand streams held open at once.
//! Every loop ends at a deadline.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{Bytes, BytesMut};
use http::{HeaderName, HeaderValue, Method, Request, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

/// The path every benchmark request goes to.
pub const CHAT_COMPLETIONS: &str = "/v1/chat/completions";

/// One request, sent as many times as a run asks.
#[derive(Debug, Clone)]
pub struct Shot {
    pub address: SocketAddr,
    pub path: String,
    pub body: Bytes,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

impl Shot {
    /// A POST of `body` to the chat completions path, with `x-bench-*` and other headers.
    pub fn chat_completion(
        address: SocketAddr,
        body: &Bytes,
        headers: &[(&'static str, &str)],
    ) -> Shot {
        Shot {
            address,
            path: CHAT_COMPLETIONS.to_owned(),
            body: body.clone(),
            headers: headers
                .iter()
                .filter_map(|(name, value)| {
                    Some((
                        HeaderName::from_static(name),
                        HeaderValue::from_str(value).ok()?,
                    ))
                })
                .collect(),
        }
    }

    fn request(&self) -> Result<Request<Full<Bytes>>, String> {
        let mut request = Request::new(Full::new(self.body.clone()));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.path.parse().map_err(|error| format!("{error}"))?;
        let headers = request.headers_mut();
        headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1"));
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer sk-bench"),
        );
        for (name, value) in &self.headers {
            headers.insert(name.clone(), value.clone());
        }
        Ok(request)
    }
}

async fn connect(address: SocketAddr) -> Result<SendRequest<Full<Bytes>>, String> {
    let stream = TcpStream::connect(address)
        .await
        .map_err(|error| format!("connect {address}: {error}"))?;
    let _ = stream.set_nodelay(true);
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|error| format!("handshake {address}: {error}"))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

/// One request and its whole answer; the status and body, or why it failed.
async fn exchange(
    sender: &mut SendRequest<Full<Bytes>>,
    shot: &Shot,
) -> Result<(StatusCode, Bytes), String> {
    sender
        .ready()
        .await
        .map_err(|error| format!("connection: {error}"))?;
    let response = sender
        .send_request(shot.request()?)
        .await
        .map_err(|error| format!("request: {error}"))?;
    let status = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|error| format!("body: {error}"))?
        .to_bytes();
    Ok((status, body))
}

/// Sends `shot` once on a fresh connection.
pub async fn once(shot: &Shot) -> Result<(StatusCode, Bytes), String> {
    let mut sender = connect(shot.address).await?;
    exchange(&mut sender, shot).await
}

/// What a closed-loop run saw.
#[derive(Debug, Default)]
pub struct LoadResult {
    pub ok: u64,
    pub failed: u64,
    pub first_failure: Option<String>,
    /// Latency of each successful request, in microseconds, sorted.
    pub latencies_us: Vec<u32>,
    pub elapsed: Duration,
}

impl LoadResult {
    pub fn rate(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// A latency percentile in milliseconds (NaN when nothing succeeded).
    pub fn percentile_ms(&self, percentile: f64) -> f64 {
        percentile_of(&self.latencies_us, percentile).map_or(f64::NAN, |us| f64::from(us) / 1e3)
    }
}

/// The value at or below which `percentile` percent of the sorted `values` fall (nearest rank).
pub fn percentile_of<T: Copy>(sorted: &[T], percentile: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((percentile / 100.0) * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// `connections` connections each send `shot` back to back until `duration` is over. Only
/// 200 answers count as successes.
pub async fn closed_loop(shot: Arc<Shot>, connections: usize, duration: Duration) -> LoadResult {
    let started = Instant::now();
    let deadline = started + duration;
    let workers: Vec<_> = (0..connections)
        .map(|_| {
            let shot = shot.clone();
            tokio::spawn(async move {
                let mut result = LoadResult::default();
                let mut sender = None;
                while Instant::now() < deadline {
                    let connection = match &mut sender {
                        Some(connection) => connection,
                        None => match connect(shot.address).await {
                            Ok(connection) => sender.insert(connection),
                            Err(error) => {
                                result.failed += 1;
                                result.first_failure.get_or_insert(error);
                                tokio::time::sleep(Duration::from_millis(10)).await;
                                continue;
                            }
                        },
                    };
                    let sent = Instant::now();
                    match exchange(connection, &shot).await {
                        Ok((StatusCode::OK, _)) => {
                            result.ok += 1;
                            let micros = sent.elapsed().as_micros();
                            result
                                .latencies_us
                                .push(micros.min(u32::MAX as u128) as u32);
                        }
                        Ok((status, body)) => {
                            result.failed += 1;
                            result.first_failure.get_or_insert_with(|| {
                                format!(
                                    "{status}: {}",
                                    String::from_utf8_lossy(&body[..body.len().min(300)])
                                )
                            });
                        }
                        Err(error) => {
                            result.failed += 1;
                            result.first_failure.get_or_insert(error);
                            sender = None;
                        }
                    }
                }
                result
            })
        })
        .collect();
    let mut total = LoadResult::default();
    for worker in workers {
        if let Ok(result) = worker.await {
            total.ok += result.ok;
            total.failed += result.failed;
            if total.first_failure.is_none() {
                total.first_failure = result.first_failure;
            }
            total.latencies_us.extend(result.latencies_us);
        }
    }
    total.elapsed = started.elapsed();
    total.latencies_us.sort_unstable();
    total
}

/// Checks one 200 answer's body: `Err` with what is wrong counts the exchange as failed.
pub type AnswerCheck = Arc<dyn Fn(&[u8]) -> Result<(), String> + Send + Sync>;

/// `connections` connections send `shot` back to back until `total` exchanges have been sent,
/// or `deadline` passes. Only 200 answers that `check` accepts count as successes.
pub async fn counted(
    shot: Arc<Shot>,
    connections: usize,
    total: u64,
    check: AnswerCheck,
    deadline: Duration,
) -> LoadResult {
    let started = Instant::now();
    let deadline = started + deadline;
    let tickets = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let workers: Vec<_> = (0..connections.max(1))
        .map(|_| {
            let (shot, check, tickets) = (shot.clone(), check.clone(), tickets.clone());
            tokio::spawn(async move {
                let mut result = LoadResult::default();
                let mut sender = None;
                while Instant::now() < deadline
                    && tickets.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < total
                {
                    let connection = match &mut sender {
                        Some(connection) => connection,
                        None => match connect(shot.address).await {
                            Ok(connection) => sender.insert(connection),
                            Err(error) => {
                                result.failed += 1;
                                result.first_failure.get_or_insert(error);
                                tokio::time::sleep(Duration::from_millis(10)).await;
                                continue;
                            }
                        },
                    };
                    let sent = Instant::now();
                    match exchange(connection, &shot).await {
                        Ok((StatusCode::OK, body)) => match check(&body) {
                            Ok(()) => {
                                result.ok += 1;
                                let micros = sent.elapsed().as_micros();
                                result
                                    .latencies_us
                                    .push(micros.min(u32::MAX as u128) as u32);
                            }
                            Err(problem) => {
                                result.failed += 1;
                                result.first_failure.get_or_insert(problem);
                            }
                        },
                        Ok((status, body)) => {
                            result.failed += 1;
                            result.first_failure.get_or_insert_with(|| {
                                format!(
                                    "{status}: {}",
                                    String::from_utf8_lossy(&body[..body.len().min(300)])
                                )
                            });
                        }
                        Err(error) => {
                            result.failed += 1;
                            result.first_failure.get_or_insert(error);
                            sender = None;
                        }
                    }
                }
                result
            })
        })
        .collect();
    let mut total = LoadResult::default();
    for worker in workers {
        if let Ok(result) = worker.await {
            total.ok += result.ok;
            total.failed += result.failed;
            if total.first_failure.is_none() {
                total.first_failure = result.first_failure;
            }
            total.latencies_us.extend(result.latencies_us);
        }
    }
    total.elapsed = started.elapsed();
    total.latencies_us.sort_unstable();
    total
}

/// What a set of SSE streams saw.
#[derive(Debug, Default)]
pub struct StreamResult {
    /// Streams that ended with `[DONE]` after a 200.
    pub completed: u64,
    pub failed: u64,
    pub first_failure: Option<String>,
    /// For each stamped text delta: arrival minus the upstream's send stamp, in nanoseconds.
    pub delays_ns: Vec<i64>,
}

const STAMP: &[u8] = br#""bench_sent_ns":"#;

fn now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_nanos() as i64)
}

/// Reads one SSE answer as it arrives, timing each stamped event when its last byte lands.
async fn read_stream(shot: &Shot, deadline: Instant) -> Result<Vec<i64>, String> {
    let mut sender = connect(shot.address).await?;
    sender
        .ready()
        .await
        .map_err(|error| format!("connection: {error}"))?;
    let response = sender
        .send_request(shot.request()?)
        .await
        .map_err(|error| format!("request: {error}"))?;
    let status = response.status();
    let mut body = response.into_body();
    let mut pending = BytesMut::new();
    let mut delays = Vec::new();
    let mut done = false;
    loop {
        let frame = tokio::time::timeout_at(deadline.into(), body.frame())
            .await
            .map_err(|_| "the stream outlived its deadline".to_owned())?;
        let Some(frame) = frame else { break };
        let frame = frame.map_err(|error| format!("body: {error}"))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let arrived = now_ns();
        pending.extend_from_slice(&data);
        // Complete events only: a stamp cut between two frames is read once its event is whole.
        while let Some(end) = memchr::memmem::find(&pending, b"\n\n") {
            let event = pending.split_to(end + 2);
            if let Some(at) = memchr::memmem::find(&event, STAMP) {
                let digits: Vec<u8> = event[at + STAMP.len()..]
                    .iter()
                    .copied()
                    .take_while(u8::is_ascii_digit)
                    .collect();
                if let Some(sent) = std::str::from_utf8(&digits)
                    .ok()
                    .and_then(|text| text.parse::<i64>().ok())
                {
                    delays.push(arrived - sent);
                }
            }
            done |= event.starts_with(b"data: [DONE]");
        }
    }
    if status != StatusCode::OK {
        return Err(format!(
            "{status}: {}",
            String::from_utf8_lossy(&pending[..pending.len().min(300)])
        ));
    }
    if !done {
        return Err("the stream ended without [DONE]".to_owned());
    }
    Ok(delays)
}

/// Opens `streams` SSE answers at once (each on its own connection) and reads them to the end,
/// giving up on any still open at `deadline`.
pub async fn streams(shot: Arc<Shot>, streams: usize, deadline: Instant) -> StreamResult {
    let readers: Vec<_> = (0..streams)
        .map(|_| {
            let shot = shot.clone();
            tokio::spawn(async move { read_stream(&shot, deadline).await })
        })
        .collect();
    let mut result = StreamResult::default();
    for reader in readers {
        match reader.await {
            Ok(Ok(delays)) => {
                result.completed += 1;
                result.delays_ns.extend(delays);
            }
            Ok(Err(error)) => {
                result.failed += 1;
                result.first_failure.get_or_insert(error);
            }
            Err(error) => {
                result.failed += 1;
                result.first_failure.get_or_insert(error.to_string());
            }
        }
    }
    result.delays_ns.sort_unstable();
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let values: Vec<u32> = (1..=100).collect();
        assert_eq!(percentile_of(&values, 50.0), Some(50));
        assert_eq!(percentile_of(&values, 99.0), Some(99));
        assert_eq!(percentile_of(&values, 100.0), Some(100));
        assert_eq!(percentile_of(&[7u32], 99.0), Some(7));
        assert_eq!(percentile_of::<u32>(&[], 50.0), None);
    }
}
