//! How a request body is read, the same way for every format: the one-pass reading that is the
//! reference, and the cached reading (the top level scanned, the head read from its few fields,
//! the declared tools from the declared-tools cache unless the `tools` text is new) that must
//! give exactly what the reference gives. A format says only what differs: which fields of the
//! head it reads, and its step after the tools are read.

use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::format::{ParseError, ToolRequest, WireFormat, read_json};
use crate::tool::{DeclaredTool, ToolKind};
use crate::tool_entry::{ToolEntry, declared_tools, declared_tools_of_text, schema_text};
use crate::tools_cache::{DeclaredToolsCache, KnownTools, ToolFields};

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
    let functions = head.functions_of::<Reader>().map(RawValue::get);
    let functions = ToolFields::new(Reader::FORMAT, None, functions);
    declare_functions(&mut declared_tools, functions.functions, &body)?;
    Reader::complete_tools(&mut declared_tools);
    Ok(head.request::<Reader>(declared_tools.into(), &body))
}

/// [`read_request`] with the declared tools from `cache` when it has them (else read and kept);
/// `None` where this reading fails, for the exact one to read the body again and say why.
///
/// The body's top level is read by a scan ([`crate::scan`]) that serde_json would accept the
/// same way, so the head is read by serde from a copy of its few fields, and the tool arrays
/// are taken as the text they are in the body: not read at all when the cache finds its entry
/// where `tools` starts.
fn read_cached<Reader: RequestReader>(
    body: &Bytes,
    cache: &DeclaredToolsCache,
) -> Option<ToolRequest> {
    let top_level = TopLevel::of(body, |rest| cache.tools_at(Reader::FORMAT, rest))?;
    let head = read_json::<RequestHead>(&top_level.head).ok()?;
    let functions = top_level.functions.filter(|_| Reader::HAS_FUNCTIONS);
    let known_tools = top_level.known_tools.as_ref();
    let tools = known_tools.map(KnownTools::text).or(top_level.tools);
    let fields = ToolFields::new(Reader::FORMAT, tools, functions);
    let declared_tools = cache
        .declared_tools(body, &fields, read_tools::<Reader>, known_tools)
        .ok()?;
    Some(head.request::<Reader>(declared_tools, body))
}

/// A body's top level as the cached reading takes it apart.
struct TopLevel<'a> {
    /// The body's top-level object with the head's fields as written and every other value
    /// written `0`, keys and their order kept: serde reads the same head from it as from the
    /// body (it skips what it does not read, and a repeated key is still repeated), without
    /// the conversation.
    head: Vec<u8>,
    /// The text of the first top-level `tools` (unless its entry is known: the entry has the
    /// same text, checked already) and `functions`.
    tools: Option<&'a str>,
    functions: Option<&'a str>,
    /// The cache's entry of the first `tools`, if `known_tools_at` found one.
    known_tools: Option<KnownTools>,
}

impl<'a> TopLevel<'a> {
    /// `None` when the scan declines the body or a tool array is not UTF-8 (the exact reading
    /// then says what is wrong). `known_tools_at` finds the cache's entry of a `tools` array
    /// from where it starts in the body.
    fn of(
        body: &'a [u8],
        known_tools_at: impl Fn(&[u8]) -> Option<KnownTools>,
    ) -> Option<TopLevel<'a>> {
        let mut head = Vec::with_capacity(128);
        head.push(b'{');
        let (mut tools, mut functions) = (None, None);
        let mut known_tools = None;
        let known = |key: &[u8], at: usize| {
            if key != b"tools" || known_tools.is_some() {
                return None;
            }
            let found = known_tools_at(&body[at..])?;
            let end = at + found.len();
            known_tools = Some(found);
            Some(end)
        };
        crate::scan::object_members(body, known, |key, value| {
            if head.len() > 1 {
                head.push(b',');
            }
            head.push(b'"');
            head.extend_from_slice(key);
            head.extend_from_slice(b"\":");
            match key {
                _ if <RequestHead>::VERBATIM.contains(&key) => head.extend_from_slice(&body[value]),
                b"tools" => {
                    head.push(b'0');
                    tools.get_or_insert(value);
                }
                b"functions" => {
                    head.push(b'0');
                    functions.get_or_insert(value);
                }
                _ => head.push(b'0'),
            }
        })?;
        head.push(b'}');
        let text = |value: Option<std::ops::Range<usize>>| match value {
            Some(value) => std::str::from_utf8(&body[value]).ok().map(Some),
            None => Some(None),
        };
        Some(TopLevel {
            head,
            tools: if known_tools.is_some() {
                None
            } else {
                text(tools)?
            },
            functions: text(functions)?,
            known_tools,
        })
    }
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
    /// The fields the cached reading copies as written into the head it reads; it takes
    /// `tools` and `functions` from the body. A test holds these to the struct's fields.
    const VERBATIM: [&'static [u8]; 4] = [b"stream", b"model", b"toolgate", b"background"];

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

#[cfg(test)]
mod tests {
    use serde::de::{self, Deserializer, Visitor};

    use super::*;

    /// The field names serde's derive gives a struct, asked of a deserializer that only notes
    /// them.
    fn fields_of<'de, T: Deserialize<'de>>() -> &'static [&'static str] {
        struct Fields(&'static [&'static str]);
        impl<'de> Deserializer<'de> for &mut Fields {
            type Error = de::value::Error;
            fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
                Err(de::Error::custom("not a struct"))
            }
            fn deserialize_struct<V: Visitor<'de>>(
                self,
                _: &'static str,
                fields: &'static [&'static str],
                _: V,
            ) -> Result<V::Value, Self::Error> {
                self.0 = fields;
                Err(de::Error::custom("noted"))
            }
            serde::forward_to_deserialize_any! {
                bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
                byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
                identifier ignored_any
            }
        }
        let mut fields = Fields(&[]);
        let _ = T::deserialize(&mut fields);
        fields.0
    }

    #[test]
    fn the_cached_reading_copies_every_field_of_the_head_but_the_tool_arrays() {
        let mut fields: Vec<&[u8]> = fields_of::<RequestHead>()
            .iter()
            .map(|field| field.as_bytes())
            .collect();
        fields.sort();
        let mut read: Vec<&[u8]> = <RequestHead>::VERBATIM.to_vec();
        read.extend([&b"tools"[..], b"functions"]);
        read.sort();
        assert_eq!(fields, read);
    }
}
