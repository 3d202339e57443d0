//! Reading an answer as a guard must: by its own shape, whatever the request's format, route
//! setting or `stream` flag said, and closed on doubt. An answer is read as a stream when its
//! bytes are events and as JSON otherwise; a JSON answer is read by every format whose
//! call-bearing field it has (each adapter names its own: `choices`, `output`, `content`), so an
//! answer in another format
//! than expected is still checked. What the strict readers refuse is refused as a whole when a
//! forgiving client could still read a call from it ([`crate::lenient`]); an answer that carries
//! no call field at all (embeddings, a token count, a model list) reads as "no calls".

use crate::format::{ParseError, ParseErrorKind, ToolResponse, WireFormat, read_json};
use crate::lenient;
use crate::stream;

/// The calls of a complete answer body, for checking. `Err` means the answer must not reach
/// the client: a client could read a call from it that toolgate cannot read unambiguously.
/// `hint` is the exchange's format, used for a body that is a stream.
///
/// A generation's answer has no third kind: it is UTF-8 JSON (a leading byte-order mark is
/// skipped, as clients skip it) or events, or it is refused, whatever its content type or
/// encoding says. Clients decode UTF-16 and UTF-32 JSON too (Python's `json` does), so a body
/// toolgate would have to guess at is one it does not release.
pub fn read_answer(hint: WireFormat, body: &[u8]) -> Result<ToolResponse, ParseError> {
    read_answer_as(hint, body, NotJson::Refused)
}

/// The calls of a complete answer from an endpoint that generates nothing (a file's content,
/// speech, an embedding): read as [`read_answer`] reads JSON and events, while a body of
/// another kind (audio, a binary file) carries no call unless it holds a call's fields.
pub fn read_non_generation_answer(
    hint: WireFormat,
    body: &[u8],
) -> Result<ToolResponse, ParseError> {
    read_answer_as(hint, body, NotJson::PassedUnlessMarked)
}

/// What becomes of a body that is neither JSON nor events.
#[derive(Clone, Copy, PartialEq, Eq)]
enum NotJson {
    Refused,
    PassedUnlessMarked,
}

fn read_answer_as(
    hint: WireFormat,
    body: &[u8],
    not_json: NotJson,
) -> Result<ToolResponse, ParseError> {
    if looks_like_event_stream(body) {
        let reassembled = stream::reassemble(hint, [body]);
        return match reassembled.refused {
            Some(error) => Err(error),
            None => Ok(reassembled.response),
        };
    }
    let body = body.strip_prefix(UTF8_BOM).unwrap_or(body);
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(ToolResponse::default());
    }
    match read_json_answer(hint, body) {
        Err(error) if error.kind() == ParseErrorKind::Syntax => match not_json {
            NotJson::PassedUnlessMarked if !lenient::may_carry_calls(body) => {
                Ok(ToolResponse::default())
            }
            _ => Err(ParseError::unreadable(not_json_reason(body, &error))),
        },
        read => read,
    }
}

/// The byte-order mark a UTF-8 text may open with.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Why a body is not read, in words an operator can act on.
fn not_json_reason(body: &[u8], error: &ParseError) -> String {
    let encoding = match body {
        [0, 0, 0xFE, 0xFF, ..] | [0xFF, 0xFE, 0, 0, ..] => Some("UTF-32"),
        [0xFE, 0xFF, ..] | [0xFF, 0xFE, ..] => Some("UTF-16"),
        _ if body.contains(&0) => Some("UTF-16 or UTF-32 (it holds NUL bytes)"),
        _ => None,
    };
    match encoding {
        Some(encoding) => format!(
            "the answer is {encoding}, not UTF-8 JSON or an event stream: clients decode it, toolgate does not guess"
        ),
        None => format!("the answer is neither UTF-8 JSON nor an event stream ({error})"),
    }
}

/// A format's reading of an answer, and whether the answer also has another format's calls
/// field, which only the reading by every field takes in.
pub(crate) struct Reading {
    pub(crate) response: ToolResponse,
    pub(crate) other_calls_field: bool,
}

/// A top-level field of an answer noted and its value skipped: each format's reading notes the
/// other formats' calls fields so. Any value notes it, `null` too: the reading by every field
/// counts keys, whatever their values.
#[derive(Default)]
pub(crate) struct Noted(pub(crate) bool);

impl<'de> serde::Deserialize<'de> for Noted {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(deserializer).map(|_| Noted(true))
    }
}

/// How many times each format's call field is a top-level key of an answer: read without
/// copying a key or a value (the answer's hot path reads it on every guarded exchange).
#[derive(Default)]
struct CallFields([u8; WireFormat::ALL.len()]);

impl CallFields {
    fn count(&self, field: &str) -> u8 {
        WireFormat::ALL
            .iter()
            .position(|format| format.calls_field() == field)
            .and_then(|at| self.0.get(at).copied())
            .unwrap_or(0)
    }
}

impl<'de> serde::Deserialize<'de> for CallFields {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = CallFields;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<CallFields, A::Error> {
                let mut fields = CallFields::default();
                while let Some(FieldKey(format)) = map.next_key::<FieldKey>()? {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    if let Some(seen) = format.and_then(|at| fields.0.get_mut(at)) {
                        *seen = seen.saturating_add(1);
                    }
                }
                Ok(fields)
            }
        }
        deserializer.deserialize_map(Keys)
    }
}

/// A top-level key, as the position of the format whose call field it is: compared where it
/// lies in the body, never copied.
struct FieldKey(Option<usize>);

impl<'de> serde::Deserialize<'de> for FieldKey {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Key;
        impl serde::de::Visitor<'_> for Key {
            type Value = FieldKey;
            fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
                formatter.write_str("a key")
            }
            fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<FieldKey, E> {
                Ok(FieldKey(
                    WireFormat::ALL
                        .iter()
                        .position(|format| format.calls_field() == key),
                ))
            }
        }
        deserializer.deserialize_str(Key)
    }
}

/// A JSON answer: refused when a call-bearing field it has cannot be read strictly, or when it
/// is not JSON but holds a call's fields; read as carrying no call otherwise.
fn read_json_answer(hint: WireFormat, body: &[u8]) -> Result<ToolResponse, ParseError> {
    let first = body.iter().find(|byte| !byte.is_ascii_whitespace());
    if first == Some(&b'[') {
        return read_json_list(hint, body);
    }
    if first != Some(&b'{') {
        // serde would read a struct from an array too. JSON that is neither an object nor a
        // list is no format's answer and carries no call; what is not JSON is the caller's.
        return read_json::<serde::de::IgnoredAny>(body)
            .map(|_| ToolResponse::default())
            .map_err(ParseError::from);
    }
    // The usual answer has the expected format's calls field and no other's: that format reads
    // it in one pass, and its reading is the one below. Any doubt (a failed reading, another
    // format's field) is left to the reading by every field, which says why.
    if let Ok(reading) = hint.read_response(body)
        && !reading.other_calls_field
    {
        return Ok(reading.response);
    }
    read_every_calls_field(body)
}

/// A JSON list: every object in it read as an answer of its own, calls and all. Gemini's
/// `streamGenerateContent` without `alt=sse` answers a list of chunks, each a whole answer its
/// clients read; a list of another format's answers is read the same way, closed on doubt.
fn read_json_list(hint: WireFormat, body: &[u8]) -> Result<ToolResponse, ParseError> {
    let items: Vec<&serde_json::value::RawValue> = read_json(body)?;
    let mut response = ToolResponse::default();
    for item in items {
        let text = item.get().as_bytes();
        if !matches!(text.first(), Some(b'{' | b'[')) {
            continue;
        }
        let read = read_json_answer(hint, text)?;
        response.calls.extend(read.calls);
        if response.reasoning.is_none() {
            response.reasoning = read.reasoning;
        }
    }
    Ok(response)
}

/// A JSON object answer read by each format whose calls field it has: the reading the one-pass
/// reading is held to (public for the fuzz target that does).
#[doc(hidden)]
pub fn read_every_calls_field(body: &[u8]) -> Result<ToolResponse, ParseError> {
    // Only the keys are read here: which formats' call fields the answer has.
    let fields: CallFields = match read_json(body) {
        Ok(fields) => fields,
        Err(error) => {
            let error = ParseError::from(error);
            return match error.kind() {
                ParseErrorKind::Shape if !lenient::may_carry_calls(body) => {
                    Ok(ToolResponse::default())
                }
                ParseErrorKind::Ambiguous => Err(error),
                ParseErrorKind::Shape => Err(ParseError::unreadable(format!(
                    "a client could read a tool call from it, but toolgate cannot: {error}"
                ))),
                // Not JSON: the caller knows whether its endpoint may answer so.
                _ => Err(error),
            };
        }
    };
    let mut response = ToolResponse::default();
    for format in WireFormat::ALL {
        let field = format.calls_field();
        match fields.count(field) {
            0 => continue,
            1 => {}
            _ => {
                return Err(ParseError::with_kind(
                    ParseErrorKind::Ambiguous,
                    format!("the answer repeats its '{field}'"),
                ));
            }
        }
        let read = format
            .parse_response(body)
            .map_err(|error| match error.kind() {
                ParseErrorKind::Ambiguous => error,
                _ => ParseError::unreadable(format!("a {} answer: {error}", format.name())),
            })?;
        response.calls.extend(read.calls);
        if response.reasoning.is_none() {
            response.reasoning = read.reasoning;
        }
    }
    Ok(response)
}

/// Whether a body is a stream of events rather than a JSON document: its first line (after a
/// byte-order mark and blank space) is an SSE field or comment, or any of its lines is a `data`
/// field. An SSE client skips lines it does not know (`x-request-id: 1`), so a stream may open
/// with anything; no JSON document has a line that starts with `data`, as a line of JSON text
/// outside a string starts with a JSON token.
pub fn looks_like_event_stream(body: &[u8]) -> bool {
    let body = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
    let start = body.iter().position(|byte| !byte.is_ascii_whitespace());
    let Some(first) = start.and_then(|start| body.get(start..)) else {
        return false;
    };
    let is_field = |line: &[u8], field: &[u8]| {
        line.strip_prefix(field)
            .is_some_and(|rest| matches!(rest.first(), None | Some(b':' | b'\r' | b'\n')))
    };
    // Every guarded answer passes here: line starts are found with memchr, not byte by byte,
    // and a one-line JSON answer has none to look at.
    first.starts_with(b":")
        || [&b"data"[..], b"event", b"id", b"retry"]
            .iter()
            .any(|field| is_field(first, field))
        || std::iter::once(0)
            .chain(memchr::memchr2_iter(b'\r', b'\n', body).map(|end| end + 1))
            .any(|start| {
                body.get(start..)
                    .is_some_and(|line| is_field(line, b"data"))
            })
}

/// The first call whose name was not written as a JSON string (a number, an array, an object,
/// a boolean: the readers keep such a name as its JSON text). Clients coerce such values each
/// their own way (JavaScript reads `["x"]` as the key `x`), so no name toolgate could check
/// is the one a client dispatches by: the guard refuses the answer.
pub fn odd_name(response: &ToolResponse) -> Option<&str> {
    response
        .calls
        .iter()
        .map(|call| call.name.as_str())
        .find(|name| {
            name.starts_with(['[', '{'])
                || matches!(*name, "true" | "false" | "null")
                || name.chars().any(char::is_control)
                || reads_as_number(name)
        })
}

/// Whether `name` is the text of a JSON number. The first test spares the usual name a failed
/// parse (and the error it allocates): a number starts with `-` or a digit after any white space.
fn reads_as_number(name: &str) -> bool {
    name.trim_start()
        .starts_with(|first: char| first == '-' || first.is_ascii_digit())
        && serde_json::from_str::<serde_json::Number>(name).is_ok()
}

impl ParseError {
    /// An answer toolgate cannot read although a client could read a call from it.
    pub fn unreadable(message: impl Into<String>) -> Self {
        ParseError::with_kind(ParseErrorKind::Unreadable, message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(response: &ToolResponse) -> Vec<&str> {
        response
            .calls
            .iter()
            .map(|call| call.name.as_str())
            .collect()
    }

    /// The one-pass reader of each format must notice every other format's calls field, or an
    /// answer carrying calls there would be read as carrying none. Built from the adapters, so
    /// a format added with a calls field of its own fails here until every reader notes it.
    #[test]
    fn each_formats_reader_notices_every_other_formats_calls_field() {
        for reader in WireFormat::ALL {
            for other in WireFormat::ALL {
                if other.calls_field() == reader.calls_field() {
                    continue;
                }
                // A whole answer of the reader's format with no call: its own text answer.
                let extension = serde_json::Value::Null;
                let notice = crate::on_block::BlockNotice {
                    request_id: "r",
                    model: "m",
                    text: "hello",
                    toolgate: &extension,
                    usage: None,
                    created: 0,
                };
                let answer: serde_json::Value =
                    serde_json::from_slice(&reader.block_message(&notice)).expect("JSON");
                let mut read = 0;
                for value in ["[]", "null", "{}", "\"text\""] {
                    let mut body = answer.clone();
                    body[other.calls_field()] = serde_json::from_str(value).expect("JSON");
                    let body = body.to_string();
                    if let Ok(reading) = reader.read_response(body.as_bytes()) {
                        read += 1;
                        assert!(
                            reading.other_calls_field,
                            "{reader:?} read past {other:?}'s field: {body}"
                        );
                    }
                }
                // A reader that refused them all would prove nothing here.
                assert!(
                    read > 0,
                    "{reader:?} read none of the answers with {other:?}'s field"
                );
            }
        }
    }

    #[test]
    fn an_answer_is_read_by_its_own_shape() {
        let responses = br#"{"object":"response","output":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}]}"#;
        let read = read_answer(WireFormat::ChatCompletions, responses).expect("readable");
        assert_eq!(names(&read), ["f"]);
        let both = br#"{"choices":[{"message":{"tool_calls":[{"id":"a","type":"function","function":{"name":"g","arguments":"{}"}}]}}],
            "type":"message","content":[{"type":"tool_use","id":"t","name":"h","input":{}}]}"#;
        let read = read_answer(WireFormat::Responses, both).expect("readable");
        assert_eq!(names(&read), ["g", "h"]);
    }

    #[test]
    fn answers_without_call_fields_carry_no_calls() {
        for body in [
            &br#"{"object":"list","data":[{"embedding":[0.1]}]}"#[..],
            br#"{"input_tokens":12}"#,
            b"",
            b"  \n",
            b"[1, 2]",
            b"\"text\"",
            b"\xEF\xBB\xBF{\"object\":\"list\"}",
        ] {
            let read = read_answer(WireFormat::ChatCompletions, body).expect("passes");
            assert!(read.calls.is_empty());
        }
    }

    #[test]
    fn a_list_of_answers_is_read_answer_by_answer() {
        // Gemini's `streamGenerateContent` without `alt=sse`: a list of whole chunks.
        let chunks = br#"[{"candidates":[{"content":{"parts":[{"text":"hi"}]}}]},
            {"candidates":[{"content":{"parts":[{"functionCall":{"name":"a","args":{}}}]},"finishReason":"STOP"}]}]"#;
        let read = read_answer(WireFormat::Gemini, chunks).expect("reads");
        assert_eq!(names(&read), ["a"]);
        // Any format's answers in a list are read, whatever the exchange's format.
        let chat = br#"[{"choices":[{"message":{"tool_calls":[{"id":"c","type":"function","function":{"name":"b","arguments":"{}"}}]}}]}]"#;
        assert_eq!(
            names(&read_answer(WireFormat::Gemini, chat).expect("reads")),
            ["b"]
        );
        let doubtful = br#"[{"candidates":[{"content":{"parts":[{"functionCall":{"name":"a"},"function_call":{"name":"b"}}]}}]}]"#;
        assert!(read_answer(WireFormat::Gemini, doubtful).is_err());
    }

    #[test]
    fn a_generation_answer_that_is_not_utf8_json_or_events_is_refused() {
        let utf16: Vec<u8> = "\u{feff}{\"choices\":[]}"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        for body in [
            &b"plain text"[..],
            b"{\"choices\": [",
            b"[1, 2",
            b"{\"a\": NaN}",
            &utf16,
            b"\xFF\xFE\x00\x00{\x00\x00\x00",
            b"\xEF\xBB\xBF\xEF\xBB\xBF{}",
        ] {
            let error = read_answer(WireFormat::ChatCompletions, body)
                .expect_err(&String::from_utf8_lossy(body));
            assert_eq!(error.kind(), ParseErrorKind::Unreadable, "{error}");
        }
        let error = read_answer(WireFormat::ChatCompletions, &utf16).expect_err("UTF-16");
        assert!(error.to_string().contains("UTF-16"), "{error}");
    }

    #[test]
    fn a_non_generation_answer_of_another_kind_passes_unless_it_holds_calls() {
        let audio = b"ID3\x03\x00\x00\x00\x00\x0fbinary";
        let read = read_non_generation_answer(WireFormat::ChatCompletions, audio).expect("passes");
        assert!(read.calls.is_empty());
        let marked = br#"{"choices":[{"message":{"tool_calls":[{"id":"a","#;
        assert!(read_non_generation_answer(WireFormat::ChatCompletions, marked).is_err());
    }

    #[test]
    fn doubtful_answers_that_could_carry_calls_are_refused() {
        let cases: [&[u8]; 6] = [
            br#"{"choices":[{"index":"0","message":{"tool_calls":[{"id":"a","type":"function","function":{"name":"g"}}]}}]}"#,
            br#"{"choices":[],"choices":[{"message":{"function_call":{"name":"g"}}}]}"#,
            br#"{"content":[{"type":"tool_use","name":"g","input":{}}]}"#,
            b"{\"choices\":[{\"message\":{\"tool_calls\":[{\"id\":\"a\",\"type\":\"function\",\"function\":{\"name\":\"g\xFF\"}}]}}]}",
            br#"{"choices":[{"message":{"tool_calls":[{"id":"a","#,
            br#"{"choices": 12}"#,
        ];
        for body in cases {
            let error = read_answer(WireFormat::ChatCompletions, body)
                .expect_err(&String::from_utf8_lossy(body));
            assert!(
                matches!(
                    error.kind(),
                    ParseErrorKind::Ambiguous | ParseErrorKind::Unreadable
                ),
                "{error}"
            );
        }
    }

    proptest::proptest! {
        /// The first test never turns away a name the parse alone would read as a number.
        #[test]
        fn the_number_test_agrees_with_the_parse_alone(
            name in "[ \\t\\r\\n\u{a0}]{0,2}[-+.0-9eE a-z]{0,8}[ \\n]{0,2}"
        ) {
            let parsed = serde_json::from_str::<serde_json::Number>(&name).is_ok();
            proptest::prop_assert_eq!(reads_as_number(&name), parsed);
        }
    }

    proptest::proptest! {
        /// The one-pass reading by the expected format gives what the reading by every calls
        /// field gives, whatever the answer's top-level fields: the formats' calls fields in
        /// their own shapes and in others', repeated, `null`, with an escaped key, beside
        /// fields no format reads.
        #[test]
        fn the_expected_formats_reading_is_the_reading_by_every_field(
            fields in proptest::collection::vec(
                (
                    proptest::sample::select(vec![
                        "choices", "output", "content", "type", "id", "usage",
                        r"cho\u0069ces", r"o\u0075tput", r"\u0063ontent",
                    ]),
                    proptest::sample::select(vec![
                        r#"[{"index":0,"message":{"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}}]"#,
                        r#"[{"type":"function_call","call_id":"c","name":"g","arguments":"{\"x\":1}"}]"#,
                        r#"[{"type":"tool_use","id":"t","name":"h","input":{}},{"type":"thinking","thinking":"hm"}]"#,
                        r#""message""#, "null", "12", "[]", "{}",
                    ]),
                ),
                0..6,
            )
        ) {
            let members: Vec<String> = fields
                .iter()
                .map(|(key, value)| format!(r#""{key}": {value}"#))
                .collect();
            let body = format!("{{{}}}", members.join(", "));
            let by_every_field = read_every_calls_field(body.as_bytes());
            for hint in WireFormat::ALL {
                proptest::prop_assert_eq!(
                    read_answer(hint, body.as_bytes()),
                    by_every_field.clone(),
                    "{:?}: {}", hint, body
                );
            }
        }
    }

    #[test]
    fn names_that_were_not_strings_are_told_apart() {
        // The Responses reader keeps a name that is not a string as its JSON text.
        let read = |name: &str| {
            let body = format!(
                r#"{{"output":[{{"type":"function_call","call_id":"c","name":{name},"arguments":"{{}}"}}]}}"#
            );
            read_answer(WireFormat::Responses, body.as_bytes()).expect("readable")
        };
        // A string that reads as a number is told apart from none: it is refused too.
        let numbers = ["5", "-2.5e3", "0.1", r#""12""#, r#"" 7""#];
        for odd in [r#"["x"]"#, r#"{"a":1}"#, "true", r#""a\u0000b""#]
            .into_iter()
            .chain(numbers)
        {
            assert!(odd_name(&read(odd)).is_some(), "{odd}");
        }
        for plain in [r#""get_weather""#, r#""server:tool""#, r#""search-v2""#] {
            assert_eq!(odd_name(&read(plain)), None, "{plain}");
        }
    }

    #[test]
    fn a_stream_in_a_json_answer_is_read_as_a_stream() {
        let body = b"data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"c\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";
        assert!(looks_like_event_stream(body));
        let read = read_answer(WireFormat::ChatCompletions, body).expect("readable");
        assert_eq!(names(&read), ["f"]);
        assert!(!looks_like_event_stream(b" {\"data\": 1}"));
        assert!(looks_like_event_stream(b"\xEF\xBB\xBF: keep-alive\n\n"));
        assert!(!looks_like_event_stream(b"database"));
        assert!(looks_like_event_stream(b"x-request-id: 1\n\ndata: {}\n\n"));
        assert!(!looks_like_event_stream(b"{\n  \"data\": 1\n}"));
    }

    proptest::proptest! {
        /// The line scan finds a `data` line exactly where splitting the body into lines does:
        /// bodies are built from the pieces that matter (field names, separators, JSON).
        #[test]
        fn the_line_scan_agrees_with_splitting_into_lines(
            pieces in proptest::collection::vec(
                proptest::sample::select(vec![
                    "data", "data:", "event", ":", "\r", "\n", "\r\n", " ", "{", "\"data\"", "x", "\u{feff}",
                ]),
                0..24,
            )
        ) {
            let body = pieces.concat();
            let body = body.as_bytes();
            let trimmed = body.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(body);
            let first = trimmed
                .iter()
                .position(|byte| !byte.is_ascii_whitespace())
                .map(|start| &trimmed[start..]);
            let is_field = |line: &[u8], field: &[u8]| {
                line.strip_prefix(field)
                    .is_some_and(|rest| matches!(rest.first(), None | Some(b':' | b'\r' | b'\n')))
            };
            let by_splitting = first.is_some_and(|first| {
                first.starts_with(b":")
                    || [&b"data"[..], b"event", b"id", b"retry"]
                        .iter()
                        .any(|field| is_field(first, field))
                    || trimmed
                        .split(|byte| matches!(byte, b'\r' | b'\n'))
                        .any(|line| is_field(line, b"data"))
            });
            proptest::prop_assert_eq!(looks_like_event_stream(body), by_splitting);
        }
    }
}
