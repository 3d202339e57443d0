//! What `benches/capture.rs` measures, reached through the gateway's own functions: the close of
//! one guarded exchange (its audit line, its capture, the console's ring) under each `[audit]
//! capture` setting, and the console's live feed. Built only with the `microbench` feature, so
//! the gateway's surface stays what `lib.rs` exports; nothing here runs in a shipped build.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use toolgate_plugin::prometheus_client::registry::Registry;
use toolgate_plugin::{ExchangeMeta, Parsed, WireFormat};

use crate::capture::CaptureStore;
use crate::config::{Config, PluginRegistry};
use crate::exchange::Exchange;
use crate::recent::RecentExchanges;
use crate::router::Route;

/// The path every exchange of the benchmark is sent to.
const PATH: &str = "/v1/chat/completions";

/// One route guarded as the load benchmark guards it (tool_selection, enforcing), one capture
/// setting, and the bodies of one exchange.
pub struct CloseCase {
    route: Arc<Route>,
    captures: CaptureStore,
    recent: RecentExchanges,
    /// Whether `[audit] output` is on (the close builds a line for it).
    audit_on: bool,
    request: Bytes,
    answer: Bytes,
    next_id: std::cell::Cell<u64>,
}

/// An exchange that read its request and its answer and checked the answer's calls, as
/// `proxy.rs` leaves it before its close.
pub struct ClosingExchange(Exchange);

/// A console watching the live feed: what `/console/api/events` holds.
pub struct LiveSubscriber(tokio::sync::broadcast::Receiver<Arc<str>>);

impl CloseCase {
    /// `capture` is the `[audit] capture` value (`off`, `blocked`, `all`), with the default ring;
    /// `audit_on`, whether the audit output is on.
    pub fn new(
        capture: &str,
        audit_on: bool,
        request: Bytes,
        answer: Bytes,
    ) -> Result<CloseCase, String> {
        let text = format!(
            "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"off\"\n\
             [upstreams.bench]\nurl = \"http://127.0.0.1:9\"\n\
             [audit]\noutput = \"off\"\ncapture = \"{capture}\"\n\
             [[plugins]]\nname = \"tool_selection\"\nmode = \"enforce\"\n\
             [plugins.settings]\nstrict = false\n\
             [[routes]]\npath = \"/v1\"\nupstream = \"bench\"\n"
        );
        let mut registry = Registry::default();
        let plugins = PluginRegistry::builtin(&mut registry);
        let config = Config::from_toml(&text, "microbench", &plugins)
            .map_err(|errors| format!("{errors:?}"))?;
        let route = config.router.find(PATH).cloned().ok_or("no route")?;
        Ok(CloseCase {
            route,
            captures: CaptureStore::new(config.capture.clone(), &mut registry),
            recent: RecentExchanges::default(),
            audit_on,
            request,
            answer,
            next_id: std::cell::Cell::new(0),
        })
    }

    /// An exchange ready to close: what `proxy.rs` does to one before `finish` (with audit
    /// output on, so its checked calls are kept for the line). Not what is measured.
    pub fn exchange(&self) -> Result<ClosingExchange, String> {
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let meta = ExchangeMeta::new(
            format!("bench-{id:016x}"),
            self.route.path.clone(),
            Method::POST,
            PATH,
        );
        let mut exchange =
            Exchange::new(meta, self.route.clone(), HeaderMap::new(), Instant::now());
        exchange.keep_checked_calls(self.audit_on);
        if self.captures.mode() != crate::capture::CaptureMode::Off {
            exchange.start_capture(self.captures.answer_limit());
        }
        exchange.capture_request(&self.request);
        let request = WireFormat::ChatCompletions
            .parse_request(self.request.clone())
            .map_err(|error| error.to_string())?;
        exchange.request_read(WireFormat::ChatCompletions, Parsed::Parsed(request));
        exchange.capture_answer(&self.answer);
        let Ok(Parsed::Parsed(answer)) = exchange.read_answer(&self.answer) else {
            return Err("the answer does not read".to_owned());
        };
        for call in answer.calls {
            exchange.record_checked_call(call);
        }
        Ok(ClosingExchange(exchange))
    }

    /// The part of an exchange's close that captures and the console add to: its audit line
    /// built and serialized, its capture kept (as the setting says), the line listed for the
    /// console and sent to its live subscribers. Returns the line's length. The exchange is
    /// left to the caller, whose drop is not the close's.
    pub fn close(&self, closing: &mut ClosingExchange) -> usize {
        self.audit_line_of(closing).map_or(0, |line| line.len())
    }

    /// What the close builds, lists and keeps for `closing`: its audit line.
    fn audit_line_of(&self, closing: &mut ClosingExchange) -> Option<String> {
        (closing.0).audit_line(
            &self.captures,
            &self.recent,
            self.audit_on,
            StatusCode::OK,
            Vec::new(),
            std::time::Duration::from_micros(100),
        )
    }

    /// The audit line of one more exchange, closed as `close` closes it.
    pub fn line(&self) -> Result<String, String> {
        let mut closing = self.exchange()?;
        self.audit_line_of(&mut closing)
            .ok_or_else(|| "no audit line".to_owned())
    }

    /// The console's ring alone: one audit line listed, as the close lists it.
    pub fn list(&self, request_id: &str, line: &str) {
        self.recent.push(request_id, line.into());
    }

    /// A console subscribing to the live feed.
    pub fn subscribe(&self) -> LiveSubscriber {
        LiveSubscriber(self.recent.subscribe())
    }

    /// How many captures the ring holds (to check that `all` keeps and `blocked` does not).
    pub fn captured(&self) -> usize {
        self.captures.list()["captures"]
            .as_array()
            .map_or(0, Vec::len)
    }
}

impl LiveSubscriber {
    /// Receives what the feed holds for it, as the console's SSE task does, and frames each
    /// line as that task frames it; returns the bytes it would send.
    pub fn drain(&mut self) -> usize {
        let mut sent = 0;
        while let Ok(line) = self.0.try_recv() {
            sent += crate::console::live_frame(&line).len();
        }
        sent
    }
}
