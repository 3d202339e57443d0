//! Captured exchanges (`[audit] capture`): the request and answer bodies of the exchanges the
//! setting names, kept so a block can be understood and replayed (`toolgate explain --capture`,
//! `--request-id`). Bounded twice: a ring in memory (the oldest go first) and, optionally, a
//! directory of JSON-lines files rotated by size. Never headers, never the query (clients put
//! keys there), and the call arguments of a captured answer pass the route's redactions. A full
//! disk or a write error drops the capture, counts it and says so once; it never stops the
//! gateway.

use std::collections::VecDeque;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{SyncSender, sync_channel};
use std::sync::{Arc, Mutex, PoisonError};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use toolgate_plugin::prometheus_client::encoding::EncodeLabelSet;
use toolgate_plugin::prometheus_client::metrics::counter::Counter;
use toolgate_plugin::prometheus_client::metrics::family::Family;
use toolgate_plugin::prometheus_client::registry::Registry;

/// Which exchanges are captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CaptureMode {
    #[default]
    Off,
    /// Those whose verdict is blocked.
    Blocked,
    /// Every audited exchange.
    All,
}

/// `[audit] capture`, `capture_ring_mib`, `capture_dir`, `capture_dir_mib`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CaptureSettings {
    pub mode: CaptureMode,
    /// What the ring in memory holds at most, in bytes of captured bodies.
    pub ring_bytes: usize,
    /// Where captures are also written, if anywhere.
    pub dir: Option<PathBuf>,
    /// What the directory holds at most, in bytes.
    pub dir_bytes: u64,
}

/// One captured exchange, as `/captures/{request_id}` serves it and `explain --capture` reads it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CaptureRecord {
    pub request_id: String,
    pub timestamp: String,
    pub route: String,
    pub method: String,
    /// The request's path, without its query.
    pub path: String,
    pub status: u16,
    pub verdict: String,
    pub streamed: bool,
    /// The client's request body.
    pub request: CapturedBody,
    /// The answer as toolgate read it (the upstream's body, or the stream's events), its calls'
    /// arguments redacted as the route redacts them; empty when no answer came.
    pub response: CapturedBody,
    pub violations: serde_json::Value,
}

impl CaptureRecord {
    /// The bytes it holds, as the ring counts them.
    fn weight(&self) -> usize {
        self.request.0.len() + self.response.0.len() + 256
    }
}

/// A captured body: the bytes the exchange already held for its checks, shared rather than
/// copied; made text (bytes that are not UTF-8 replaced) only when the record is served or
/// written.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CapturedBody(pub Bytes);

impl CapturedBody {
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl From<&str> for CapturedBody {
    fn from(text: &str) -> Self {
        CapturedBody(Bytes::copy_from_slice(text.as_bytes()))
    }
}

impl Serialize for CapturedBody {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // The validation's fast path first: the lossy walk is for bodies that are not UTF-8.
        match std::str::from_utf8(&self.0) {
            Ok(text) => serializer.serialize_str(text),
            Err(_) => serializer.serialize_str(&String::from_utf8_lossy(&self.0)),
        }
    }
}

impl<'de> Deserialize<'de> for CapturedBody {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(|text| CapturedBody(Bytes::from(text)))
    }
}

/// What an exchange collects for its capture while it runs.
#[derive(Debug, Default)]
pub struct Captured {
    pub request: Bytes,
    /// The calls of the last answer checked, so the route's redactions can be written into the
    /// captured answer without reading it again.
    pub calls: Vec<toolgate_plugin::ToolCall>,
    /// A whole answer, shared with the exchange that read it (no copy).
    pub whole: Option<Bytes>,
    /// A streamed answer's events, copied as they pass.
    pub answer: Vec<u8>,
    /// The answer's events went past what the ring can hold: the rest is not kept.
    pub answer_cut: bool,
    /// How many bytes of answer are collected at most.
    pub limit: usize,
}

impl Captured {
    /// Appends a stream event's bytes, up to the limit in all.
    pub fn add_answer_bytes(&mut self, bytes: &[u8]) {
        if self.answer.len() + bytes.len() > self.limit {
            self.answer_cut = true;
            return;
        }
        self.answer.extend_from_slice(bytes);
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

/// The captures kept: the ring, and the directory writer.
pub struct CaptureStore {
    settings: CaptureSettings,
    ring: Mutex<Ring>,
    /// The directory writer's queue: files are written on a thread of their own, so a slow or
    /// full disk never holds an exchange's close.
    dir: Option<SyncSender<ToDirectory>>,
    counts: Family<OutcomeLabels, Counter>,
    said_write_error: Arc<AtomicBool>,
}

/// What the directory writer's thread is asked to do.
enum ToDirectory {
    Write(Arc<CaptureRecord>),
    /// Answers once everything asked before is written (or dropped).
    Flush(std::sync::mpsc::Sender<()>),
}

/// How many captures may wait for the directory writer; past it they are dropped and counted.
const DIRECTORY_QUEUE: usize = 256;

#[derive(Default)]
struct Ring {
    records: VecDeque<Arc<CaptureRecord>>,
    bytes: usize,
}

impl CaptureStore {
    pub fn new(settings: CaptureSettings, registry: &mut Registry) -> Self {
        let counts = toolgate_plugin::registered(
            registry,
            "toolgate_captures",
            "Exchanges captured ([audit] capture), by outcome (kept; dropped: too large for the ring, or not written to capture_dir)",
            Family::default(),
        );
        for outcome in ["kept", "dropped"] {
            counts.get_or_create_owned(&OutcomeLabels { outcome });
        }
        let said_write_error = Arc::new(AtomicBool::new(false));
        let dir = settings.dir.clone().and_then(|dir| {
            let writer = DirWriter::new(dir, settings.dir_bytes);
            start_directory_writer(writer, counts.clone(), said_write_error.clone())
        });
        CaptureStore {
            settings,
            ring: Mutex::new(Ring::default()),
            dir,
            counts,
            said_write_error,
        }
    }

    pub fn mode(&self) -> CaptureMode {
        self.settings.mode
    }

    /// Whether an exchange with this verdict is captured.
    pub fn wants(&self, blocked: bool) -> bool {
        match self.settings.mode {
            CaptureMode::Off => false,
            CaptureMode::Blocked => blocked,
            CaptureMode::All => true,
        }
    }

    /// How many bytes of one answer an exchange collects at most.
    pub fn answer_limit(&self) -> usize {
        self.settings.ring_bytes
    }

    /// Keeps a record: in the ring (the oldest leave to make room) and, queued for its writer,
    /// in the directory.
    pub fn keep(&self, record: CaptureRecord) {
        let weight = record.weight();
        if weight > self.settings.ring_bytes {
            self.count("dropped");
            return;
        }
        let record = Arc::new(record);
        if let Some(dir) = &self.dir
            && dir.try_send(ToDirectory::Write(record.clone())).is_err()
        {
            dropped(
                &self.counts,
                &self.said_write_error,
                &"the capture_dir writer fell behind",
            );
        }
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        ring.bytes += weight;
        ring.records.push_back(record);
        while ring.bytes > self.settings.ring_bytes {
            let Some(oldest) = ring.records.pop_front() else {
                break;
            };
            ring.bytes -= oldest.weight();
        }
        drop(ring);
        self.count("kept");
    }

    /// Waits, at most `limit`, until the captures kept so far are written to the directory:
    /// at shutdown, and in tests.
    pub fn flush(&self, limit: std::time::Duration) {
        let Some(dir) = &self.dir else { return };
        let (done, written) = std::sync::mpsc::channel();
        if dir.send(ToDirectory::Flush(done)).is_ok() {
            let _ = written.recv_timeout(limit);
        }
    }

    /// The record of an exchange, if the ring still holds it.
    pub fn find(&self, request_id: &str) -> Option<Arc<CaptureRecord>> {
        let ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        ring.records
            .iter()
            .rev()
            .find(|record| record.request_id == request_id)
            .cloned()
    }

    /// A summary of every record the ring holds, newest first.
    pub fn list(&self) -> serde_json::Value {
        let ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let records: Vec<serde_json::Value> = ring
            .records
            .iter()
            .rev()
            .map(|record| {
                serde_json::json!({
                    "request_id": record.request_id,
                    "timestamp": record.timestamp,
                    "route": record.route,
                    "path": record.path,
                    "status": record.status,
                    "verdict": record.verdict,
                })
            })
            .collect();
        serde_json::json!({ "captures": records, "bytes": ring.bytes })
    }

    fn count(&self, outcome: &'static str) {
        self.counts.get_or_create(&OutcomeLabels { outcome }).inc();
    }
}

/// Counts a capture the directory did not get, and says so the first time.
fn dropped(
    counts: &Family<OutcomeLabels, Counter>,
    said: &AtomicBool,
    why: &dyn std::fmt::Display,
) {
    counts
        .get_or_create(&OutcomeLabels { outcome: "dropped" })
        .inc();
    if !said.swap(true, Ordering::Relaxed) {
        tracing::warn!(error = %why, "a capture could not be written to capture_dir; captures that fail are dropped and counted in toolgate_captures_total{{outcome=\"dropped\"}} (said once)");
    }
}

/// Starts the thread that writes captures to the directory; `None` (the directory is not
/// written, said once) when no thread can be started.
fn start_directory_writer(
    mut writer: DirWriter,
    counts: Family<OutcomeLabels, Counter>,
    said: Arc<AtomicBool>,
) -> Option<SyncSender<ToDirectory>> {
    let (queue, asked) = sync_channel(DIRECTORY_QUEUE);
    let started = std::thread::Builder::new()
        .name("toolgate-captures".to_owned())
        .spawn(move || {
            for request in asked {
                match request {
                    ToDirectory::Write(record) => {
                        if let Err(error) = writer.write(&record) {
                            dropped(&counts, &said, &error);
                        }
                    }
                    ToDirectory::Flush(done) => {
                        let _ = done.send(());
                    }
                }
            }
        });
    match started {
        Ok(_) => Some(queue),
        Err(error) => {
            tracing::warn!(%error, "cannot start the capture_dir writer; captures stay in memory only");
            None
        }
    }
}

/// Appends records as JSON lines to files `captures-<n>.jsonl` in one directory, a new file
/// every eighth of the budget, deleting the oldest files while the directory holds more.
struct DirWriter {
    dir: PathBuf,
    budget: u64,
    /// The file being written and its size.
    current: Option<(PathBuf, std::fs::File, u64)>,
    next: u64,
}

impl DirWriter {
    fn new(dir: PathBuf, budget: u64) -> Self {
        DirWriter {
            dir,
            budget,
            current: None,
            next: 0,
        }
    }

    fn write(&mut self, record: &CaptureRecord) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(record).map_err(std::io::Error::other)?;
        line.push(b'\n');
        let file_budget = (self.budget / 8).max(1);
        let full = self
            .current
            .as_ref()
            .is_some_and(|(_, _, size)| size + line.len() as u64 > file_budget);
        if self.current.is_none() || full {
            std::fs::create_dir_all(&self.dir)?;
            let millis = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_millis());
            let path = self
                .dir
                .join(format!("captures-{millis:013}-{:06}.jsonl", self.next));
            self.next += 1;
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)?;
            self.current = Some((path, file, 0));
            self.prune()?;
        }
        if let Some((_, file, size)) = &mut self.current {
            file.write_all(&line)?;
            *size += line.len() as u64;
        }
        Ok(())
    }

    /// Deletes the oldest capture files while the directory holds more than its budget.
    fn prune(&self) -> std::io::Result<()> {
        let mut files: Vec<(PathBuf, u64)> = std::fs::read_dir(&self.dir)?
            .flatten()
            .filter(|entry| {
                let name = entry.file_name();
                let name = name.to_string_lossy();
                name.starts_with("captures-") && name.ends_with(".jsonl")
            })
            .filter_map(|entry| Some((entry.path(), entry.metadata().ok()?.len())))
            .collect();
        files.sort();
        let mut total: u64 = files.iter().map(|(_, size)| size).sum();
        let current = self.current.as_ref().map(|(path, _, _)| path);
        for (path, size) in files {
            if total <= self.budget {
                break;
            }
            if Some(&path) == current {
                continue;
            }
            std::fs::remove_file(&path)?;
            total -= size;
        }
        Ok(())
    }
}

/// A request path and query as logs and captures may show it: the values of query parameters
/// that carry credentials (`key`, `api_key`, `access_token`, …) replaced.
pub fn path_for_logs(path_and_query: &str) -> String {
    let Some((path, query)) = path_and_query.split_once('?') else {
        return path_and_query.to_owned();
    };
    let credential = |name: &str| {
        let name = name.to_ascii_lowercase();
        matches!(
            name.as_str(),
            "key" | "api_key" | "api-key" | "apikey" | "access_token" | "token" | "auth" | "sig"
        )
    };
    let parts: Vec<String> = query
        .split('&')
        .map(|part| match part.split_once('=') {
            Some((name, _)) if credential(name) => format!("{name}=REDACTED"),
            _ => part.to_owned(),
        })
        .collect();
    format!("{path}?{}", parts.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, size: usize) -> CaptureRecord {
        CaptureRecord {
            request_id: id.to_owned(),
            timestamp: "t".to_owned(),
            route: "/v1".to_owned(),
            method: "POST".to_owned(),
            path: "/v1/chat/completions".to_owned(),
            status: 403,
            verdict: "blocked".to_owned(),
            streamed: false,
            request: CapturedBody::from("x".repeat(size).as_str()),
            response: CapturedBody::default(),
            violations: serde_json::Value::Null,
        }
    }

    #[test]
    fn the_ring_keeps_the_newest_within_its_bytes() {
        let settings = CaptureSettings {
            mode: CaptureMode::All,
            ring_bytes: 10_000,
            dir: None,
            dir_bytes: 0,
        };
        let store = CaptureStore::new(settings, &mut Registry::default());
        for index in 0..10 {
            store.keep(record(&format!("r{index}"), 3_000));
        }
        assert!(store.find("r9").is_some() && store.find("r7").is_some());
        assert!(store.find("r6").is_none(), "the oldest went");
        let list = store.list();
        assert!(list["bytes"].as_u64().unwrap_or(u64::MAX) <= 10_000);
        assert_eq!(list["captures"][0]["request_id"], "r9");
        store.keep(record("huge", 20_000));
        assert!(
            store.find("huge").is_none(),
            "larger than the ring: dropped"
        );
    }

    #[test]
    fn the_directory_is_rotated_and_kept_within_its_budget() {
        let dir = std::env::temp_dir().join(format!("toolgate-captures-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let settings = CaptureSettings {
            mode: CaptureMode::All,
            ring_bytes: 1 << 20,
            dir: Some(dir.clone()),
            dir_bytes: 40_000,
        };
        let store = CaptureStore::new(settings, &mut Registry::default());
        for index in 0..40 {
            store.keep(record(&format!("r{index}"), 2_000));
        }
        store.flush(std::time::Duration::from_secs(10));
        let files: Vec<u64> = std::fs::read_dir(&dir)
            .expect("the directory")
            .flatten()
            .filter_map(|entry| entry.metadata().ok().map(|meta| meta.len()))
            .collect();
        assert!(files.len() > 1, "rotated: {files:?}");
        let total: u64 = files.iter().sum();
        assert!(total <= 40_000 + 5_000 + 2_500, "pruned: {total}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_that_cannot_be_written_drops_the_file_copy_and_keeps_serving() {
        // A path under a regular file can never be a directory: every write fails, as on a
        // full disk.
        let blocker = std::env::temp_dir().join(format!("toolgate-blocker-{}", std::process::id()));
        std::fs::write(&blocker, b"a file").expect("a file");
        let mut registry = Registry::default();
        let settings = CaptureSettings {
            mode: CaptureMode::All,
            ring_bytes: 1 << 20,
            dir: Some(blocker.join("captures")),
            dir_bytes: 1 << 20,
        };
        let store = CaptureStore::new(settings, &mut registry);
        store.keep(record("r1", 10));
        store.keep(record("r2", 10));
        store.flush(std::time::Duration::from_secs(10));
        assert!(store.find("r2").is_some(), "the ring still has it");
        let mut text = String::new();
        toolgate_plugin::prometheus_client::encoding::text::encode(&mut text, &registry)
            .expect("encodes");
        assert!(
            text.contains("toolgate_captures_total{outcome=\"dropped\"} 2"),
            "{text}"
        );
        let _ = std::fs::remove_file(&blocker);
    }

    #[test]
    fn credentials_in_a_query_are_not_shown() {
        assert_eq!(
            path_for_logs("/v1beta/models/m:generateContent?key=AIzaSECRET&alt=sse"),
            "/v1beta/models/m:generateContent?key=REDACTED&alt=sse"
        );
        assert_eq!(
            path_for_logs("/v1/chat/completions"),
            "/v1/chat/completions"
        );
    }
}
