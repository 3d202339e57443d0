//! Progressive tool disclosure (seed 003), as a plugin offers it: the model is shown an index
//! of the declared tools and the definitions it asks for, and the gateway answers the model's
//! discovery calls itself. The plugin decides what is shown and answers each discovery call;
//! the gateway writes the view into the request in the exchange's format, runs the rounds in
//! the exchange's one loop, and never lets a discovery call reach the client.

use std::time::Duration;

use async_trait::async_trait;

use crate::exchange::RequestExchange;
use crate::tool::ToolCall;
use crate::verdict::Rejection;
pub use toolgate_formats::disclosure::{DiscoveryTool, ToolDefinition};

/// What the model is shown of one exchange's tools, as of the latest round.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DisclosedView {
    /// Text added to the system prompt: the index of the tools the model may load.
    pub index: String,
    /// The declared tools shown with their full definitions (loaded), by name.
    pub loaded: Vec<String>,
    /// Their definitions as the request wrote them, in the same order: what goes in `tools`.
    pub definitions: Vec<String>,
}

/// How far one exchange's discovery rounds may go: past either bound, the exchange ends as a
/// block of the disclosure plugin (the route's `on_block` for it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DiscoveryLimits {
    /// The most rounds answered by the gateway in one exchange.
    pub max_rounds: u32,
    /// The longest an exchange may spend before another round starts.
    pub deadline: Duration,
}

/// A plugin that discloses tools progressively (returned by [`Plugin::disclosure`]).
///
/// [`Plugin::disclosure`]: crate::Plugin::disclosure
#[async_trait]
pub trait ToolDisclosure: Send + Sync {
    /// The tools the model is given to discover the others: the gateway answers calls to
    /// them, and only them, through [`DisclosureSession::answer`].
    fn discovery_tools(&self) -> &[DiscoveryTool];

    /// The bounds of one exchange's rounds.
    fn limits(&self) -> DiscoveryLimits;

    /// Opens one exchange's disclosure, after every other plugin's `pre_request`: `permitted`
    /// are the declared tools the route's plugins leave the request (what the model may ever
    /// see). `Ok(None)` leaves the request as declared (too few tools to be worth it); a
    /// rejection refuses it (a declared tool that takes a discovery tool's name, a store that
    /// cannot answer).
    async fn open(
        &self,
        exchange: &RequestExchange<'_>,
        permitted: Vec<ToolDefinition>,
    ) -> Result<Option<Box<dyn DisclosureSession>>, Rejection>;
}

/// One exchange's disclosure, from its request to its close.
#[async_trait]
pub trait DisclosureSession: Send + Sync {
    /// What the model is shown now: the index and the loaded tools.
    fn view(&self) -> &DisclosedView;

    /// Answers one round's discovery calls: each call's result, in order, as the model reads
    /// it. May change [`view`](Self::view) (a tool loaded, another unloaded) for the next
    /// round's request.
    async fn answer(&mut self, calls: &[&ToolCall]) -> Vec<String>;

    /// Ends the exchange's disclosure: what was loaded is kept for the conversation's next
    /// request. Runs once, whether or not the answer reached the client.
    async fn close(&mut self);

    /// What the exchange's audit line records of the disclosure (rounds, loads, sizes).
    fn record(&self) -> serde_json::Value;
}
