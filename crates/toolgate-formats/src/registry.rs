//! The registry of wire formats: which adapter each [`WireFormat`] is, and the format-neutral
//! entry points that dispatch to it. Adding a format is its folder and a line in
//! [`WireFormat::adapter`].

use bytes::Bytes;

use crate::adapter::Adapter;
use crate::disclosure::{DisclosedTools, ToolDefinition};
use crate::edits::Edit;
use crate::format::{Claim, ParseError, ToolRequest, ToolResponse, WireFormat, read_json};
use crate::on_block::{BlockNotice, CallFeedback};
use crate::raw_object::RawObject;
use crate::stream::StreamAssembler;
use crate::tools_cache::DeclaredToolsCache;
use crate::{anthropic, chat, gemini, response_edits, responses};

impl WireFormat {
    /// Every format, in the order answers are read by their call fields.
    pub const ALL: [WireFormat; 4] = [
        WireFormat::ChatCompletions,
        WireFormat::Responses,
        WireFormat::AnthropicMessages,
        WireFormat::Gemini,
    ];

    /// The registry: the adapter of each format.
    pub(crate) fn adapter(self) -> &'static dyn Adapter {
        match self {
            WireFormat::ChatCompletions => &chat::Chat,
            WireFormat::Responses => &responses::Responses,
            WireFormat::AnthropicMessages => &anthropic::Anthropic,
            WireFormat::Gemini => &gemini::Gemini,
        }
    }

    /// The name used in configuration (`format = "…"`).
    pub fn name(self) -> &'static str {
        self.adapter().name()
    }

    /// The format a configuration name means.
    pub fn from_name(name: &str) -> Option<WireFormat> {
        WireFormat::ALL
            .into_iter()
            .find(|format| format.name() == name)
    }

    /// The format an endpoint path speaks, as each adapter judges it (by its last segments, or
    /// its verb).
    pub fn from_path(path: &str) -> Option<WireFormat> {
        WireFormat::ALL
            .into_iter()
            .find(|format| format.adapter().speaks_path(path))
    }

    /// Whether a request path (without its query) is where an API toolgate speaks answers
    /// generations, as each format's adapter says.
    pub fn is_generation_path(path: &str) -> bool {
        WireFormat::ALL
            .into_iter()
            .any(|format| format.adapter().serves_generations_at(path))
    }

    /// Whether this format's requests' tools are read through the declared-tools cache.
    pub fn caches_declared_tools(self) -> bool {
        self.adapter().caches_declared_tools()
    }

    /// Completes `request`, read from its body, with what its path and query (`target`) say.
    pub fn read_target(self, request: &mut ToolRequest, target: &str) {
        self.adapter().read_target(request, target);
    }

    /// The format a request body has the shape of, as each format's adapter judges it: the
    /// first sure of it, else the first that finds it likely (`messages` alone is chat's).
    pub fn from_body(body: &[u8]) -> Option<WireFormat> {
        let claims = WireFormat::ALL.map(|format| (format, format.adapter().claims(body)));
        let first = |wanted: Claim| {
            (claims.iter())
                .find(|(_, claim)| *claim == wanted)
                .map(|(format, _)| *format)
        };
        first(Claim::Sure).or_else(|| first(Claim::Likely))
    }

    /// Where this format's API answers generations.
    pub fn generation_endpoints(self) -> &'static [crate::format::GenerationEndpoint] {
        self.adapter().generation_endpoints()
    }

    /// How this format's API takes the caller's key.
    pub fn key_header(self) -> crate::format::KeyHeader {
        self.adapter().key_header()
    }

    /// toolgate's own error as a body this format's clients' SDKs read.
    pub fn error_body(self, facts: &crate::format::ErrorFacts<'_>) -> serde_json::Value {
        self.adapter().error_body(facts)
    }

    /// toolgate's own error as the event that ends one of this format's streams.
    pub fn error_event(self, facts: &crate::format::ErrorFacts<'_>, sequence_number: u64) -> Bytes {
        self.adapter().error_event(facts, sequence_number)
    }

    /// The top-level answer field that carries this format's calls.
    pub fn calls_field(self) -> &'static str {
        self.adapter().calls_field()
    }

    /// Reads the declared tools and the stream flag of a request body.
    pub fn parse_request(self, body: Bytes) -> Result<ToolRequest, ParseError> {
        self.adapter().parse_request(body, None)
    }

    /// [`WireFormat::parse_request`], with the declared tools taken from `cache` when it holds
    /// the reading of the same `tools` (and chat `functions`) bytes, and kept there otherwise.
    /// The result is the one `parse_request` gives, its schemas sharing the cache's copy of the
    /// arrays instead of the body.
    pub fn parse_request_cached(
        self,
        body: Bytes,
        cache: &DeclaredToolsCache,
    ) -> Result<ToolRequest, ParseError> {
        self.adapter().parse_request(body, Some(cache))
    }

    /// Reads the tool calls of a complete (non-streamed) response body.
    pub fn parse_response(self, body: &[u8]) -> Result<ToolResponse, ParseError> {
        self.adapter().parse_response(body)
    }

    /// [`WireFormat::parse_response`], noting whether the answer has another format's calls
    /// field.
    pub(crate) fn read_response(self, body: &[u8]) -> Result<crate::answer::Reading, ParseError> {
        self.adapter().read_response(body)
    }

    /// A fresh assembler for one streamed response in this format.
    pub fn stream_assembler(self) -> Box<dyn StreamAssembler> {
        self.adapter().stream_assembler()
    }

    /// Applies response edits (replaced arguments) to a complete response body and returns the
    /// new body, or `None` when no edit changed anything (the original bytes then go as they are).
    pub fn apply_response_edits(
        self,
        body: &[u8],
        edits: &[Edit],
    ) -> Result<Option<Bytes>, ParseError> {
        response_edits::apply(self, body, edits)
    }

    /// Applies request edits (removing declared tools) and returns the new body, or `None`
    /// when no edit changed anything, so an untouched body is forwarded as its original bytes.
    /// A request built without a body (an MCP call's) is edited with
    /// [`ToolRequest::remove_declared_tools`] instead.
    pub fn apply_request_edits(
        self,
        body: &[u8],
        edits: &[Edit],
    ) -> Result<Option<Bytes>, ParseError> {
        if edits.contains(&Edit::StripToolFields) {
            return strip_fields(body, self.adapter().tool_fields());
        }
        let removed = crate::format::removed_tool_names(edits);
        if removed.is_empty() {
            return Ok(None);
        }
        self.adapter().remove_tools(body, &removed)
    }

    /// The request `body` continued with the model's blocked turn and, as each blocked call's
    /// result, why it did not run: what `on_block = "retry"` sends upstream. `Err` when the
    /// calls cannot be answered that way (a built-in tool the provider runs).
    pub fn retry_request(
        self,
        body: &[u8],
        feedback: &[CallFeedback<'_>],
    ) -> Result<Bytes, ParseError> {
        self.adapter().retry_request(body, feedback)
    }

    /// The function and custom tools the request declares, with their descriptions and
    /// definitions as written: what progressive disclosure may hide and load.
    pub fn tool_definitions(self, body: &[u8]) -> Result<Vec<ToolDefinition>, ParseError> {
        self.adapter().tool_definitions(body)
    }

    /// The request with the `hidden` declared tools taken out (but for a tool its
    /// `tool_choice` forces): what progressive disclosure starts from, once per request.
    pub fn hide_tools(self, body: &[u8], hidden: &[&str]) -> Result<Bytes, ParseError> {
        let adapter = self.adapter();
        let forced = adapter.forced_tools(body);
        let hidden: Vec<&str> = (hidden.iter().copied())
            .filter(|name| !forced.iter().any(|forced| forced == name))
            .collect();
        let Some(edited) = adapter.remove_tools(body, &hidden)? else {
            return Ok(Bytes::copy_from_slice(body));
        };
        crate::disclosure::with_choice_of(body, edited, adapter.choice_fields())
    }

    /// The request as the model is shown it under progressive disclosure: `body` (from
    /// [`WireFormat::hide_tools`], continued) with the shown definitions, the discovery tools
    /// and the index.
    pub fn disclose(self, body: &[u8], shown: &DisclosedTools<'_>) -> Result<Bytes, ParseError> {
        let adapter = self.adapter();
        let mut added: Vec<String> = shown.shown.iter().map(|text| (*text).to_owned()).collect();
        added.extend((shown.discovery.iter()).map(|tool| adapter.discovery_tool(tool).to_string()));
        let mut edited = Bytes::copy_from_slice(body);
        if !added.is_empty() {
            edited = crate::disclosure::with_tools_appended(&edited, &added)?;
        }
        if shown.instructions.is_empty() {
            return Ok(edited);
        }
        adapter.add_instructions(&edited, shown.instructions)
    }

    /// The `on_block = "message"` answer: a complete answer of this format whose assistant
    /// text says what was blocked, with no calls and a normal finish.
    pub fn block_message(self, notice: &BlockNotice<'_>) -> Bytes {
        self.adapter().block_message(notice)
    }

    /// [`WireFormat::block_message`] as a whole stream of this format's events.
    pub fn block_message_stream(self, notice: &BlockNotice<'_>) -> Bytes {
        self.adapter().block_message_stream(notice)
    }
}

/// Removes top-level fields; `None` when none of them is there.
fn strip_fields(body: &[u8], fields: &[&str]) -> Result<Option<Bytes>, ParseError> {
    let object: RawObject = read_json(body)?;
    let present: Vec<(&str, Option<String>)> = fields
        .iter()
        .filter(|field| object.0.iter().any(|(key, _)| key == *field))
        .map(|field| (*field, None))
        .collect();
    if present.is_empty() {
        return Ok(None);
    }
    Ok(Some(Bytes::from(object.write(&present))))
}
