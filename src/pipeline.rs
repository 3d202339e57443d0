//! The plugin chain of a route and the stages it runs. Plugins evaluate; this file enforces:
//! it orders the chain by priority, applies each entry's mode (an observed block is recorded and
//! let through), merges blocks into one rejection, and applies edits in the exchange's format.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use futures_util::future::join_all;
use http::HeaderMap;
use toolgate_plugin::plugin::{BodyNeeds, StageWork};
use toolgate_plugin::{
    AvailabilityQuery, CompletedExchange, Edit, ExchangeMeta, Parsed, Plugin, Rejection,
    RequestEdit, RequestExchange, ResponseEdit, ResponseExchange, ToolRequest, Verdict, WireFormat,
};

use crate::on_block::OnBlock;

/// How a chain entry's verdicts are applied: the route's `mode`, or the entry's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Blocks what the plugin blocks.
    Enforce,
    /// Records what the plugin would block and lets everything through.
    Observe,
}

impl Mode {
    /// As the configuration spells it, and as the metrics' `mode` label reads.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Observe => "observe",
        }
    }
}

/// One plugin in a route's chain.
pub struct ChainEntry {
    pub name: String,
    pub plugin: Arc<dyn Plugin>,
    pub mode: Mode,
    pub priority: i32,
    /// What this entry's block does to the exchange.
    pub on_block: OnBlock,
    /// Whether streamed text is held until the calls are checked (`hold_text`), so that this
    /// entry's block can still be recovered from after text.
    pub hold_text: bool,
    /// Cleared once the plugin answers that it has no work in that stage.
    pub work: StagesWithWork,
}

/// The stages a plugin may leave out that it may still have work in: all, until it answers
/// [`StageWork::Nothing`] from one (its default, or its settings' answer), once per config load.
#[derive(Debug)]
pub struct StagesWithWork {
    on_delivery: AtomicBool,
    post_response: AtomicBool,
}

impl Default for StagesWithWork {
    fn default() -> Self {
        StagesWithWork {
            on_delivery: AtomicBool::new(true),
            post_response: AtomicBool::new(true),
        }
    }
}

impl StagesWithWork {
    fn learn(flag: &AtomicBool, work: StageWork) {
        if work == StageWork::Nothing {
            flag.store(false, Ordering::Relaxed);
        }
    }
}

/// A route's plugins in the order they run (lower priority first).
pub struct Chain {
    entries: Vec<ChainEntry>,
    needs: BodyNeeds,
    enforces_responses: bool,
    recovers: bool,
    holds_text: bool,
}

/// A block that a plugin in observe mode would have made.
#[derive(Debug, Clone)]
pub struct ObservedBlock {
    pub plugin: String,
    pub rejection: Rejection,
}

/// What a stage decided.
#[derive(Debug, Default)]
pub struct StageOutcome {
    /// Set when an enforcing plugin blocked: the merged rejection of every enforcing block.
    pub blocked: Option<Rejection>,
    /// Names of the plugins whose block is in `blocked`.
    pub blocked_by: Vec<String>,
    /// What the block does, the strictest choice of the entries in `blocked_by`.
    pub on_block: Option<OnBlock>,
    pub observed: Vec<ObservedBlock>,
    /// Header edits for the request sent upstream.
    pub request_headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// Header edits for the response sent to the client.
    pub response_headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// Edits to the response body, in the adapters' terms (pre_response only).
    pub response_edits: Vec<Edit>,
    /// Fields plugins added to the audit line.
    pub annotations: Vec<(String, serde_json::Value)>,
}

impl StageOutcome {
    /// An observed plugin's edits change nothing, but its audit fields record what it saw.
    /// An observe-mode plugin's edits: its annotations are kept (they record what was seen and
    /// change nothing), the rest is only logged.
    fn observe<E: StageEdit>(&mut self, entry: &ChainEntry, edits: &[E]) {
        for (key, value) in edits.iter().filter_map(StageEdit::annotation) {
            self.annotations.push((key.clone(), value.clone()));
        }
        tracing::info!(plugin = %entry.name, ?edits, "observe mode: would have modified the {}", E::TARGET);
    }

    /// An enforcing plugin's `pre_request` edits: headers and annotations kept for later,
    /// tool edits made to the body through its format's adapter, and the request read again
    /// from the edited body (a body-less MCP request is edited in place).
    fn apply_request_edits(
        &mut self,
        entry: &ChainEntry,
        edits: Vec<RequestEdit>,
        format: WireFormat,
        request: &mut Parsed<ToolRequest>,
        body: &mut Bytes,
    ) {
        let bodiless = matches!(request, Parsed::Parsed(parsed) if parsed.format.is_none());
        let mut body_edits = Vec::new();
        for edit in edits {
            match edit {
                RequestEdit::SetRequestHeader(name, value) => {
                    self.request_headers.push((name, value));
                }
                RequestEdit::SetResponseHeader(name, value) => {
                    self.response_headers.push((name, value));
                }
                RequestEdit::Annotate(key, value) => self.annotations.push((key, value)),
                RequestEdit::RemoveDeclaredTools(names) => {
                    if let Parsed::Parsed(parsed) = request
                        && bodiless
                    {
                        parsed.remove_declared_tools(&names);
                    }
                    body_edits.push(Edit::RemoveDeclaredTools(names));
                }
                RequestEdit::StripToolFields => {
                    if let Parsed::Parsed(parsed) = request
                        && bodiless
                    {
                        parsed.declared_tools = Arc::new([]);
                    }
                    body_edits.push(Edit::StripToolFields);
                }
            }
        }
        if body_edits.is_empty() || bodiless {
            return;
        }
        match format.apply_request_edits(body, &body_edits) {
            Ok(Some(edited)) => {
                *body = edited;
                *request = match format.parse_request(body.clone()) {
                    Ok(parsed) => Parsed::Parsed(parsed),
                    Err(error) => Parsed::Unparsable(error),
                };
            }
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(plugin = %entry.name, %error, "could not apply the plugin's request edits");
            }
        }
    }

    /// An enforcing plugin's `pre_response` edits, kept for the answer's release.
    fn apply_response_edits(&mut self, edits: Vec<ResponseEdit>) {
        for edit in edits {
            match edit {
                ResponseEdit::SetResponseHeader(name, value) => {
                    self.response_headers.push((name, value));
                }
                ResponseEdit::Annotate(key, value) => self.annotations.push((key, value)),
                ResponseEdit::ReplaceArguments {
                    choice,
                    call_id,
                    arguments,
                } => self.response_edits.push(Edit::ReplaceArguments {
                    choice,
                    call_id,
                    arguments,
                }),
            }
        }
    }

    fn record(&mut self, entry: &ChainEntry, rejection: Rejection) {
        match entry.mode {
            Mode::Observe => {
                tracing::info!(plugin = %entry.name, violations = rejection.violations.len(), "observe mode: would have blocked");
                self.observed.push(ObservedBlock {
                    plugin: entry.name.clone(),
                    rejection,
                });
            }
            Mode::Enforce => {
                self.blocked_by.push(entry.name.clone());
                let choice = entry.on_block.for_rejection(&rejection);
                self.on_block = Some(match self.on_block {
                    Some(earlier) => earlier.stricter(choice),
                    None => choice,
                });
                match &mut self.blocked {
                    Some(first) => first.violations.extend(rejection.violations),
                    None => self.blocked = Some(rejection),
                }
            }
        }
    }
}

impl Chain {
    pub fn new(mut entries: Vec<ChainEntry>) -> Self {
        entries.sort_by_key(|entry| entry.priority);
        let needs = entries.iter().fold(BodyNeeds::default(), |needs, entry| {
            let plugin = entry.plugin.body_needs();
            BodyNeeds {
                request: needs.request || plugin.request,
                response: needs.response || plugin.response,
            }
        });
        let enforces_responses = entries
            .iter()
            .any(|entry| entry.mode == Mode::Enforce && entry.plugin.body_needs().response);
        let recovers = entries
            .iter()
            .any(|entry| entry.mode == Mode::Enforce && entry.on_block != OnBlock::Error);
        let holds_text = entries.iter().any(|entry| {
            entry.mode == Mode::Enforce && entry.on_block != OnBlock::Error && entry.hold_text
        });
        Chain {
            entries,
            needs,
            enforces_responses,
            recovers,
            holds_text,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn body_needs(&self) -> BodyNeeds {
        self.needs
    }

    /// Whether some plugin of the chain may have `post_response` work; without one the stage
    /// is not scheduled at all.
    pub fn runs_post_response(&self) -> bool {
        (self.entries.iter()).any(|entry| entry.work.post_response.load(Ordering::Relaxed))
    }

    /// Whether some plugin of the chain may record the calls delivered to the client.
    pub fn runs_on_delivery(&self) -> bool {
        (self.entries.iter()).any(|entry| entry.work.on_delivery.load(Ordering::Relaxed))
    }

    /// Whether some enforcing plugin judges answers: only then does the gateway refuse an
    /// answer it cannot read (a chain that only observes never blocks).
    pub fn enforces_responses(&self) -> bool {
        self.enforces_responses
    }

    /// Whether some enforcing entry answers its blocks otherwise than with the 403: only then
    /// does an exchange keep what a retry needs.
    pub fn recovers(&self) -> bool {
        self.recovers
    }

    /// Whether a stream's text is held until its calls are checked: some enforcing entry
    /// that recovers from its blocks asks for it (`hold_text`).
    pub fn holds_text(&self) -> bool {
        self.holds_text
    }

    /// The chain's progressive disclosure: the first enforcing entry whose plugin offers one,
    /// with what that entry's block does.
    pub fn disclosure(&self) -> Option<(&dyn toolgate_plugin::ToolDisclosure, OnBlock)> {
        (self.entries.iter())
            .filter(|entry| entry.mode == Mode::Enforce)
            .find_map(|entry| Some((entry.plugin.disclosure()?, entry.on_block)))
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|entry| entry.name.as_str())
    }

    /// The entries in the order they run, for the start-up route table.
    pub fn entries(&self) -> &[ChainEntry] {
        &self.entries
    }

    /// Runs `pre_request` in order. Each plugin sees the edits of those before it: a body edit
    /// rewrites `body` in the request's format and `request` is read again from it.
    pub async fn pre_request(
        &self,
        meta: &ExchangeMeta,
        headers: &HeaderMap,
        format: WireFormat,
        request: &mut Parsed<ToolRequest>,
        body: &mut Bytes,
    ) -> StageOutcome {
        let mut outcome = StageOutcome::default();
        for entry in &self.entries {
            let exchange = RequestExchange {
                meta,
                headers,
                request,
            };
            match entry.plugin.pre_request(&exchange).await {
                Verdict::Continue => {}
                Verdict::Block(rejection) => {
                    outcome.record(entry, rejection);
                    if outcome.blocked.is_some() {
                        return outcome;
                    }
                }
                Verdict::Modify(edits) if entry.mode == Mode::Observe => {
                    outcome.observe(entry, &edits);
                }
                Verdict::Modify(edits) => {
                    outcome.apply_request_edits(entry, edits, format, request, body);
                }
            }
        }
        outcome
    }

    /// Runs `pre_response` of every plugin concurrently (a judge or a remote check must not
    /// wait for another), then applies the verdicts in priority order.
    pub async fn pre_response(&self, exchange: &ResponseExchange<'_>) -> StageOutcome {
        let verdicts = join_all(
            self.entries
                .iter()
                .map(|entry| entry.plugin.pre_response(exchange)),
        )
        .await;
        let mut outcome = StageOutcome::default();
        for (entry, verdict) in self.entries.iter().zip(verdicts) {
            match verdict {
                Verdict::Continue => {}
                Verdict::Block(rejection) => outcome.record(entry, rejection),
                Verdict::Modify(edits) if entry.mode == Mode::Observe => {
                    outcome.observe(entry, &edits);
                }
                Verdict::Modify(edits) => outcome.apply_response_edits(edits),
            }
        }
        outcome
    }

    /// Why the enforcing plugins of this chain would keep `tool` from a request like `query`,
    /// by plugin (for `GET /tools`).
    pub fn unavailability(
        &self,
        query: &AvailabilityQuery,
        tool: &str,
    ) -> Vec<(&str, toolgate_plugin::Violation)> {
        self.entries
            .iter()
            .filter(|entry| entry.mode == Mode::Enforce)
            .filter_map(|entry| {
                entry
                    .plugin
                    .unavailability(query, tool)
                    .map(|violation| (entry.name.as_str(), violation))
            })
            .collect()
    }

    /// Lets each enforcing plugin complete a `GET /tools` query (a kept conversation's state).
    pub async fn resolve_availability(&self, query: &mut AvailabilityQuery) -> Result<(), String> {
        for entry in self
            .entries
            .iter()
            .filter(|entry| entry.mode == Mode::Enforce)
        {
            entry.plugin.resolve_availability(query).await?;
        }
        Ok(())
    }

    /// Runs `on_delivery` of every plugin that has such work, concurrently, observing ones too:
    /// recording what the client got is not enforcement.
    pub async fn on_delivery(&self, exchange: &ResponseExchange<'_>) {
        self.run_learning(
            |work| &work.on_delivery,
            |plugin| plugin.on_delivery(exchange),
        )
        .await;
    }

    /// Runs `post_response` of every plugin concurrently; nothing they do changes the exchange.
    pub async fn post_response(&self, exchange: &CompletedExchange<'_>) {
        self.run_learning(
            |work| &work.post_response,
            |plugin| plugin.post_response(exchange),
        )
        .await;
    }

    /// Runs a stage a plugin may leave out on every plugin that may have work in it,
    /// concurrently, and learns from each answer whether to call it again.
    async fn run_learning<'c, Stage>(
        &'c self,
        flag: fn(&StagesWithWork) -> &AtomicBool,
        stage: impl Fn(&'c dyn Plugin) -> Stage,
    ) where
        Stage: std::future::Future<Output = StageWork>,
    {
        join_all(
            (self.entries.iter())
                .filter(|entry| flag(&entry.work).load(Ordering::Relaxed))
                .map(|entry| {
                    let running = stage(entry.plugin.as_ref());
                    async move { StagesWithWork::learn(flag(&entry.work), running.await) }
                }),
        )
        .await;
    }
}

/// What the chain does alike with the edits of either stage.
trait StageEdit: std::fmt::Debug {
    /// What the edits would have changed, for the observe-mode log line.
    const TARGET: &'static str;
    /// The audit field this edit adds, if it is an annotation.
    fn annotation(&self) -> Option<(&String, &serde_json::Value)>;
}

impl StageEdit for RequestEdit {
    const TARGET: &'static str = "request";
    fn annotation(&self) -> Option<(&String, &serde_json::Value)> {
        match self {
            RequestEdit::Annotate(key, value) => Some((key, value)),
            _ => None,
        }
    }
}

impl StageEdit for ResponseEdit {
    const TARGET: &'static str = "response";
    fn annotation(&self) -> Option<(&String, &serde_json::Value)> {
        match self {
            ResponseEdit::Annotate(key, value) => Some((key, value)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use http::StatusCode;

    use super::*;

    /// Counts its `post_response` calls and answers that it has no work there.
    struct NoAccounting(Arc<AtomicUsize>);

    #[toolgate_plugin::async_trait]
    impl Plugin for NoAccounting {
        async fn post_response(&self, _exchange: &CompletedExchange<'_>) -> StageWork {
            self.0.fetch_add(1, Ordering::SeqCst);
            StageWork::Nothing
        }
    }

    #[tokio::test]
    async fn a_plugin_with_no_work_in_a_stage_is_no_longer_called_for_it() {
        let calls = Arc::new(AtomicUsize::new(0));
        let chain = Chain::new(vec![ChainEntry {
            name: "no_accounting".to_owned(),
            plugin: Arc::new(NoAccounting(calls.clone())),
            mode: Mode::Enforce,
            priority: 0,
            on_block: OnBlock::Error,
            hold_text: false,
            work: StagesWithWork::default(),
        }]);
        let meta = toolgate_plugin::testing::meta("/v1/chat/completions");
        let completed = CompletedExchange {
            meta: &meta,
            request_headers: &HeaderMap::new(),
            request: &Parsed::Absent,
            status: StatusCode::OK,
            delivered_calls: &[],
            executed_calls: &[],
            elapsed: Duration::ZERO,
        };
        assert!(
            chain.runs_post_response(),
            "until the plugin says otherwise"
        );
        chain.post_response(&completed).await;
        assert!(!chain.runs_post_response(), "learned from its answer");
        chain.post_response(&completed).await;
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // The other stage is learned on its own.
        assert!(chain.runs_on_delivery());
    }
}
