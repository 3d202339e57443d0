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
    /// The client's request body, as text (bytes that are not UTF-8 replaced).
    pub request: String,
    /// The answer as toolgate read it (the upstream's body, or the stream's events), its calls'
    /// arguments redacted as the route redacts them; empty when no answer came.
    pub response: String,
    pub violations: serde_json::Value,
}

impl CaptureRecord {
    /// The bytes it holds, as the ring counts them.
    fn weight(&self) -> usize {
        self.request.len() + self.response.len() + 256
    }
}

/// What an exchange collects for its capture while it runs.
#[derive(Debug, Default)]
pub struct Captured {
    pub request: Bytes,
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
    dir: Option<Mutex<DirWriter>>,
    counts: Family<OutcomeLabels, Counter>,
    said_write_error: AtomicBool,
}

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
        let dir = settings
            .dir
            .clone()
            .map(|dir| Mutex::new(DirWriter::new(dir, settings.dir_bytes)));
        CaptureStore {
            settings,
            ring: Mutex::new(Ring::default()),
            dir,
            counts,
            said_write_error: AtomicBool::new(false),
        }
    }

    pub fn mode(&self) -> CaptureMode {
        self.settings.mode
    }

    /// How many bytes of one answer an exchange collects at most.
    pub fn answer_limit(&self) -> usize {
        self.settings.ring_bytes
    }

    /// Keeps a record: in the ring (the oldest leave to make room) and in the directory.
    pub fn keep(&self, record: CaptureRecord) {
        let weight = record.weight();
        if weight > self.settings.ring_bytes {
            self.count("dropped");
            return;
        }
        let record = Arc::new(record);
        if let Some(dir) = &self.dir {
            let written = dir
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .write(&record);
            if let Err(error) = written {
                self.count("dropped");
                if !self.said_write_error.swap(true, Ordering::Relaxed) {
                    tracing::warn!(%error, "a capture could not be written to capture_dir; captures that fail are dropped and counted in toolgate_captures_total{{outcome=\"dropped\"}} (said once)");
                }
            }
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
            request: "x".repeat(size),
            response: String::new(),
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
