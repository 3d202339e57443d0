//! Google Gemini (`…/models/{model}:generateContent` and `:streamGenerateContent`, on the
//! Gemini API and Vertex AI alike): tools from `tools[].functionDeclarations` and the built-in
//! tools named by their field (`message`), calls from each candidate's `functionCall` parts and
//! the `executableCode` the provider runs, whole and from the stream's chunks, each a whole
//! answer of its own (`stream`).
//!
//! Google's JSON reader takes every field in lowerCamelCase and in snake_case
//! (`functionCall`, `function_call`), and so does its Python SDK: this folder reads an object
//! of the API through [`Fields`], which knows a field by either spelling and refuses an object
//! that spells one field twice, since which value Google reads is not toolgate's to guess.

use std::borrow::Cow;

use serde_json::value::RawValue;

use crate::format::{ParseError, ParseErrorKind, compact_json_text, name_text, text_or_raw_json};
use crate::tool::{ToolCall, ToolKind};

pub(crate) mod disclosure;
pub(crate) mod lenient;
pub(crate) mod message;
pub(crate) mod on_block;
pub(crate) mod rewrite;
pub(crate) mod schema;
pub(crate) mod stream;

pub use stream::GeminiStreamAssembler;

/// The name a call of the built-in code execution tool is checked under: the tool's field.
pub(crate) const CODE_EXECUTION: &str = "codeExecution";

/// The path verbs that answer generations, whole and streamed.
const GENERATE: &str = "generateContent";
const STREAM_GENERATE: &str = "streamGenerateContent";

/// A field name as Google's JSON reader knows it: `function_call` is `functionCall`. A name
/// with an empty part (`_x`, `a__b`, `x_`) is no field's other spelling and stays as written.
pub(crate) fn camel_case(key: &str) -> Cow<'_, str> {
    if !key.contains('_') || key.split('_').any(str::is_empty) {
        return Cow::Borrowed(key);
    }
    let mut parts = key.split('_');
    let mut camel = String::with_capacity(key.len());
    camel.push_str(parts.next().unwrap_or_default());
    for part in parts {
        let mut letters = part.chars();
        camel.extend(letters.next().map(|first| first.to_ascii_uppercase()));
        camel.push_str(letters.as_str());
    }
    Cow::Owned(camel)
}

/// One JSON object of the API, its fields known by their lowerCamelCase names; a `null` value
/// reads as unset, as Google reads it, but the field is still there to be noticed.
pub(crate) struct Fields<'a>(Vec<(Cow<'a, str>, &'a RawValue)>);

impl<'a> Fields<'a> {
    /// Reads an object; one field written twice, under one spelling or both, is ambiguous.
    pub(crate) fn read(text: &'a str) -> Result<Fields<'a>, ParseError> {
        let object: crate::raw_object::RawObject<'a> = serde_json::from_str(text)?;
        let mut fields: Vec<(Cow<'a, str>, &'a RawValue)> = Vec::with_capacity(object.0.len());
        for (key, value) in object.0 {
            let name = Cow::Owned(camel_case(&key).into_owned());
            if fields.iter().any(|(known, _)| *known == name) {
                return Err(ParseError::with_kind(
                    ParseErrorKind::Ambiguous,
                    format!("the field '{name}' is written twice in one object"),
                ));
            }
            fields.push((name, value));
        }
        Ok(Fields(fields))
    }

    /// The raw value of a field that is set.
    pub(crate) fn get(&self, name: &str) -> Option<&'a RawValue> {
        self.0
            .iter()
            .find(|(key, value)| key == name && value.get() != "null")
            .map(|(_, value)| *value)
    }

    /// Whether the object has the field, `null` or not.
    pub(crate) fn has(&self, name: &str) -> bool {
        self.0.iter().any(|(key, _)| key == name)
    }

    /// The names of the fields that are set.
    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        (self.0.iter())
            .filter(|(_, value)| value.get() != "null")
            .map(|(key, _)| key.as_ref())
    }

    /// A field that must be an object, read.
    pub(crate) fn object(&self, name: &str) -> Result<Option<Fields<'a>>, ParseError> {
        self.get(name)
            .map(|raw| {
                Fields::read(raw.get()).map_err(|error| match error.kind() {
                    ParseErrorKind::Ambiguous => error,
                    _ => ParseError::new(format!("'{name}' is not an object")),
                })
            })
            .transpose()
    }

    /// A field that must be a list, its items raw; none when absent.
    pub(crate) fn list(&self, name: &str) -> Result<Vec<&'a RawValue>, ParseError> {
        match self.get(name) {
            None => Ok(Vec::new()),
            Some(raw) => serde_json::from_str(raw.get())
                .map_err(|_| ParseError::new(format!("'{name}' is not a list"))),
        }
    }

    /// A field that must be a list of objects, each read.
    pub(crate) fn objects(&self, name: &str) -> Result<Vec<Fields<'a>>, ParseError> {
        self.list(name)?
            .into_iter()
            .map(|item| Fields::read(item.get()))
            .collect()
    }

    /// A `true` flag (`thought`, `willContinue`).
    pub(crate) fn is_true(&self, name: &str) -> bool {
        self.get(name).is_some_and(|raw| raw.get() == "true")
    }

    /// A string field's text, any other value as its JSON.
    pub(crate) fn text(&self, name: &str) -> Option<String> {
        self.get(name).map(text_or_raw_json)
    }
}

/// The calls one part of a model turn makes: a `functionCall` the client runs, or an
/// `executableCode` the provider runs (checked as a call of the built-in code execution tool).
/// A call streamed in pieces (`partialArgs`, `willContinue`) is refused: clients put such
/// pieces together each their own way.
pub(crate) fn part_call(part: &Fields<'_>, choice: u32) -> Result<Option<ToolCall>, ParseError> {
    if let Some(call) = part.object("functionCall")? {
        if call.get("partialArgs").is_some() || call.is_true("willContinue") {
            return Err(ParseError::unreadable(
                "a functionCall streamed in pieces (partialArgs / willContinue): toolgate checks only whole calls, turn streamFunctionCallArguments off",
            ));
        }
        return Ok(Some(ToolCall {
            choice,
            id: call.text("id"),
            name: call.get("name").map(name_text).unwrap_or_default(),
            kind: ToolKind::Function,
            arguments: compact_json_text(call.get("args").map_or("{}", RawValue::get)),
        }));
    }
    if let Some(code) = part.get("executableCode") {
        return Ok(Some(ToolCall {
            choice,
            id: None,
            name: CODE_EXECUTION.to_owned(),
            kind: ToolKind::Builtin,
            arguments: compact_json_text(code.get()),
        }));
    }
    Ok(None)
}

/// A candidate's place in the answer: its `index` when it gives one, else its position.
pub(crate) fn candidate_choice(candidate: &Fields<'_>, position: usize) -> u32 {
    candidate
        .get("index")
        .and_then(|raw| raw.get().parse::<u32>().ok())
        .unwrap_or(u32::try_from(position).unwrap_or(u32::MAX))
}

/// The parts of a candidate's `content`.
pub(crate) fn candidate_parts<'a>(candidate: &Fields<'a>) -> Result<Vec<Fields<'a>>, ParseError> {
    match candidate.object("content")? {
        Some(content) => content.objects("parts"),
        None => Ok(Vec::new()),
    }
}

/// The model and the verb of a Gemini path: `…/models/gemini-2.5-flash:streamGenerateContent`
/// gives `("gemini-2.5-flash", "streamGenerateContent")`; `None` for a path of no verb this
/// format answers. Verbs compare in either case, as the router compares paths.
fn model_and_verb(path: &str) -> Option<(&str, &str)> {
    let path = path.split_once('?').map_or(path, |(path, _)| path);
    let last = path.trim_end_matches('/').rsplit('/').next()?;
    let (model, verb) = last.rsplit_once(':')?;
    [GENERATE, STREAM_GENERATE]
        .iter()
        .any(|known| verb.eq_ignore_ascii_case(known))
        .then_some((model, verb))
}

/// This format's [`Adapter`](crate::adapter::Adapter).
pub(crate) struct Gemini;

impl crate::adapter::Adapter for Gemini {
    fn name(&self) -> &'static str {
        "gemini"
    }

    fn speaks_path(&self, path: &str) -> bool {
        model_and_verb(path).is_some()
    }

    fn serves_generations_at(&self, path: &str) -> bool {
        model_and_verb(path).is_some()
    }

    fn read_target(&self, request: &mut crate::format::ToolRequest, target: &str) {
        if let Some((model, verb)) = model_and_verb(target) {
            request.stream = verb.eq_ignore_ascii_case(STREAM_GENERATE);
            if request.model.is_none() && !model.is_empty() {
                request.model = Some(model.to_owned());
            }
        }
    }

    fn generation_endpoints(&self) -> &'static [crate::format::GenerationEndpoint] {
        &[crate::format::GenerationEndpoint {
            segments: &[],
            except: &[],
            documented: &[
                "/v1beta/models/{id}:generateContent",
                "/v1beta/models/{id}:streamGenerateContent",
            ],
        }]
    }

    fn key_header(&self) -> crate::format::KeyHeader {
        crate::format::KeyHeader::Named("x-goog-api-key")
    }

    fn tool_fields(&self) -> &'static [&'static str] {
        &["tools", "toolConfig", "tool_config"]
    }

    fn calls_field(&self) -> &'static str {
        "candidates"
    }

    fn parse_request(
        &self,
        body: bytes::Bytes,
        _cache: Option<&crate::tools_cache::DeclaredToolsCache>,
    ) -> Result<crate::format::ToolRequest, ParseError> {
        message::parse_request(body)
    }

    fn caches_declared_tools(&self) -> bool {
        false
    }

    fn choice_fields(&self) -> &'static [&'static str] {
        &["toolConfig", "tool_config"]
    }

    fn usage_fields(&self) -> &'static [&'static str] {
        &["usageMetadata", "usage_metadata"]
    }

    fn forced_tools(&self, body: &[u8]) -> Vec<String> {
        disclosure::forced_tools(body)
    }

    crate::adapter::folder_parts!(GeminiStreamAssembler, gemini);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_names_are_their_camel_case_field_and_odd_ones_stay() {
        assert_eq!(camel_case("function_call"), "functionCall");
        assert_eq!(camel_case("parameters_json_schema"), "parametersJsonSchema");
        assert_eq!(camel_case("functionCall"), "functionCall");
        for odd in ["_x", "a__b", "x_", "_"] {
            assert_eq!(camel_case(odd), odd);
        }
    }

    #[test]
    fn one_field_spelled_twice_is_ambiguous_and_null_is_unset() {
        let twice = Fields::read(r#"{"functionCall":{},"function_call":{}}"#);
        assert_eq!(
            twice.err().map(|error| error.kind()),
            Some(ParseErrorKind::Ambiguous)
        );
        let fields = Fields::read(r#"{"function_call":{"name":"f"},"text":null}"#).expect("reads");
        assert!(fields.get("functionCall").is_some());
        assert!(fields.get("text").is_none());
    }

    #[test]
    fn the_verb_of_a_path_names_the_format_the_model_and_the_stream() {
        let verb = |path| model_and_verb(path);
        assert_eq!(
            verb("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"),
            Some(("gemini-2.5-flash", "streamGenerateContent"))
        );
        assert_eq!(
            verb("/v1/projects/p/locations/l/publishers/google/models/m:generateContent"),
            Some(("m", "generateContent"))
        );
        assert_eq!(verb("/v1beta/models/m:countTokens"), None);
        assert_eq!(verb("/v1beta/models/m"), None);
        assert_eq!(
            verb("/v1beta/models/m:GENERATECONTENT"),
            Some(("m", "GENERATECONTENT"))
        );
    }
}
