//! How a request body is read, the same way for every format: the one-pass reading that is the
//! reference, and the cached reading (head first, the `tools` text from the declared-tools cache
//! unless it is new) that must give exactly what the reference gives. A format says only what
//! differs: which fields of the head it reads, and its step after the tools are read.

use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::format::{ParseError, ToolRequest, WireFormat, read_json};
use crate::tool::{DeclaredTool, ToolKind};
use crate::tool_entry::{ToolEntry, declared_tools, declared_tools_of_text, schema_text};
use crate::tools_cache::{DeclaredToolsCache, ToolFields};

/// What differs between the formats' request readings. Every format's request is a
/// [`RequestHead`]; a format says which of its fields it reads and what it does to the tools
/// read.
pub(crate) trait RequestReader {
    const FORMAT: WireFormat;
    /// Whether the format has `background` requests (Responses).
    const HAS_BACKGROUND: bool = false;
    /// Whether the legacy `functions[]` declares tools too (chat).
    const HAS_FUNCTIONS: bool = false;

    /// What the format does to the tools as read: names built-ins by their tool, or declares
    /// the tools a declared one implies. It must depend on nothing but the tools: the cache
    /// keeps the result for every request with the same arrays.
    fn complete_tools(_declared_tools: &mut Vec<DeclaredTool>) {}
}

/// Reads a request of `Reader`'s format, the declared tools from `cache` when it holds the
/// reading of the same arrays.
pub(crate) fn read_request<Reader: RequestReader>(
    body: Bytes,
    cache: Option<&DeclaredToolsCache>,
) -> Result<ToolRequest, ParseError> {
    // Without a cache, one pass: reading the tools apart from the head costs a second scan of
    // them, which only a cache hit pays back.
    let Some(cache) = cache else {
        return read_exact::<Reader>(body);
    };
    match read_cached::<Reader>(&body, cache) {
        Some(request) => Ok(request),
        None => read_exact::<Reader>(body),
    }
}

/// The request read in one pass, tools and head together: the reading without a cache, and
/// the reference a cached reading falls back to whenever it fails, so an error is reported
/// exactly as one pass finds it (which error comes first decides whether a body is refused as
/// ambiguous), and a body the raw text cannot be taken from (invalid UTF-8 inside `tools`) is
/// read as without a cache.
pub(crate) fn read_exact<Reader: RequestReader>(body: Bytes) -> Result<ToolRequest, ParseError> {
    let mut head: RequestHead<Vec<ToolEntry>> = read_json(&body)?;
    let mut declared_tools = declared_tools(head.tools.take().unwrap_or_default(), &body)?;
    let functions = ToolFields::new(Reader::FORMAT, None, head.functions_of::<Reader>());
    declare_functions(&mut declared_tools, functions.functions, &body)?;
    Reader::complete_tools(&mut declared_tools);
    Ok(head.request::<Reader>(declared_tools.into(), &body))
}

/// [`read_request`] with the declared tools from `cache` when it has them (else read and kept);
/// `None` where this reading fails, for the exact one to read the body again and say why.
fn read_cached<Reader: RequestReader>(
    body: &Bytes,
    cache: &DeclaredToolsCache,
) -> Option<ToolRequest> {
    if let Some(shortcut) = cache.shortcut(Reader::FORMAT, body)
        && let Ok(head) = read_json::<RequestHead>(shortcut.head())
        && let Some(declared_tools) = shortcut.declared_tools(cache, &head.tool_fields::<Reader>())
    {
        return Some(head.request::<Reader>(declared_tools, body));
    }
    let head = read_json::<RequestHead>(body).ok()?;
    let declared_tools = cache
        .declared_tools(body, &head.tool_fields::<Reader>(), read_tools::<Reader>)
        .ok()?;
    Some(head.request::<Reader>(declared_tools, body))
}

/// The declared tools of `fields`, their schemas sharing `source`, the buffer the fields lie
/// in: what the cache keeps.
fn read_tools<Reader: RequestReader>(
    source: &Bytes,
    fields: &ToolFields<'_>,
) -> Result<Vec<DeclaredTool>, ParseError> {
    let mut declared_tools = declared_tools_of_text(source, fields.tools)?;
    declare_functions(&mut declared_tools, fields.functions, source)?;
    Reader::complete_tools(&mut declared_tools);
    Ok(declared_tools)
}

/// Adds the legacy `functions[]` of their JSON text (`""`: none), their schemas sharing
/// `source`.
fn declare_functions(
    declared_tools: &mut Vec<DeclaredTool>,
    functions: &str,
    source: &Bytes,
) -> Result<(), ParseError> {
    for function in ToolFields::entries::<FunctionWire>(functions)? {
        declared_tools.push(DeclaredTool {
            name: function.name,
            kind: ToolKind::LegacyFunction,
            parameters: function
                .parameters
                .map(|schema| schema_text(source, schema)),
        });
    }
    Ok(())
}

#[derive(Deserialize)]
struct FunctionWire<'a> {
    name: String,
    #[serde(borrow, default)]
    parameters: Option<&'a RawValue>,
}

/// The top-level request fields every format's checks read: tools of any shape, chat's legacy
/// `functions`, the stream flag and the model.
///
/// `Tools` is how `tools` is read: kept as its JSON text by default, for the cached reading;
/// entry by entry in the same pass as the rest (`Vec<ToolEntry>`) in the exact one.
#[derive(Deserialize)]
// The bound in place of derive's `Tools: Default`, which `Option` does not need.
#[serde(bound(deserialize = "Tools: Deserialize<'de>"))]
pub(crate) struct RequestHead<'a, Tools = &'a RawValue> {
    #[serde(default)]
    tools: Option<Tools>,
    /// Chat's legacy `functions`, kept as its text in both readings: it is rare and short.
    #[serde(borrow, default)]
    functions: Option<&'a RawValue>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    model: Option<String>,
    #[serde(
        borrow,
        default,
        deserialize_with = "crate::directives::present_even_if_null"
    )]
    toolgate: Option<&'a RawValue>,
    /// Responses: run in the background, the answer fetched later by id.
    #[serde(default)]
    background: Option<bool>,
}

impl<'a, Tools> RequestHead<'a, Tools> {
    /// `functions` if `Reader`'s format reads it.
    fn functions_of<Reader: RequestReader>(&self) -> Option<&'a RawValue> {
        self.functions.filter(|_| Reader::HAS_FUNCTIONS)
    }

    /// The request of this head as `Reader`'s format reads it.
    fn request<Reader: RequestReader>(
        self,
        declared_tools: Arc<[DeclaredTool]>,
        body: &Bytes,
    ) -> ToolRequest {
        ToolRequest {
            format: Some(Reader::FORMAT),
            declared_tools,
            stream: self.stream.unwrap_or(false),
            background: Reader::HAS_BACKGROUND && self.background.unwrap_or(false),
            model: self.model,
            directives: self.toolgate.map(RawValue::to_owned),
            body: body.clone(),
        }
    }
}

impl<'a> RequestHead<'a> {
    /// Where this head's tool arrays are, as the cache keys them.
    fn tool_fields<Reader: RequestReader>(&self) -> ToolFields<'a> {
        ToolFields::new(Reader::FORMAT, self.tools, self.functions_of::<Reader>())
    }
}
