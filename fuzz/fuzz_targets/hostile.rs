//! Hostile mutations of an answer's bytes, for the fuzz targets: the damage the no-bypass
//! property test (`crates/toolgate-formats/tests/no_bypass.rs`) does to the answers it
//! generates, done here to whatever text the fuzzer found — a key repeated with another value,
//! a value of the wrong type, bytes that are not UTF-8 in a string, keys and strings written
//! with `\u` escapes, a `type` added to an event, a JSON answer sent as an event, a line SSE
//! clients skip put in front, events split, merged, cut off, or another format's call event
//! inserted, or the whole text re-encoded (UTF-16 or UTF-32 in either byte order, with or
//! without a byte-order mark, UTF-8 behind one). Where each lands is picked by a seed taken from the input, so a crash reproduces
//! from its input alone.

/// Picks positions from a seed: the input's FNV-1a hash, stirred by xorshift.
struct Picks(u64);

impl Picks {
    fn new(input: &[u8]) -> Self {
        let hash = input.iter().fold(0xcbf2_9ce4_8422_2325_u64, |hash, &byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
        Picks(hash | 1)
    }

    /// A number below `bound` (0 when there is nothing to pick from).
    fn below(&mut self, bound: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        usize::try_from(self.0 % (bound.max(1) as u64)).unwrap_or(0)
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        items.get(self.below(items.len()))
    }
}

/// Every hostile version of `input`: one per kind of damage, then two kinds in a row.
pub fn variants(input: &[u8]) -> Vec<Vec<u8>> {
    let mut picks = Picks::new(input);
    let mut out: Vec<Vec<u8>> = (0..KINDS)
        .filter_map(|kind| damage(input, kind, &mut picks))
        .collect();
    for _ in 0..2 {
        let first = picks.below(KINDS);
        let second = picks.below(KINDS);
        if let Some(once) = damage(input, first, &mut picks)
            && let Some(twice) = damage(&once, second, &mut picks)
        {
            out.push(twice);
        }
    }
    out
}

const KINDS: usize = 14;

fn damage(input: &[u8], kind: usize, picks: &mut Picks) -> Option<Vec<u8>> {
    let tokens = strings(input);
    let keys: Vec<Key> = tokens
        .iter()
        .filter_map(|&token| key(input, token))
        .collect();
    match kind {
        0 => duplicate_key(input, picks.pick(&keys)?, true),
        1 => duplicate_key(input, picks.pick(&keys)?, false),
        2 => confuse(input, picks.pick(&keys)?, picks.below(2) == 0),
        3 => bad_utf8(input, *picks.pick(&tokens)?, picks),
        4 => {
            let key = picks.pick(&keys)?;
            Some(splice(
                input,
                key.token,
                &escaped(&input[key.token.0..key.token.1]),
            ))
        }
        5 => Some(escape_all(input, &tokens)),
        6 => add_type(input, picks),
        7 => Some(as_event(input)),
        8 => Some([&b"x-request-id: 1\n\n"[..], input].concat()),
        9 => split_event(input, picks),
        10 => {
            let boundary = *picks.pick(&boundaries(input))?;
            Some(splice(input, (boundary - 2, boundary), b"\n"))
        }
        11 => {
            let places = [vec![0], boundaries(input)].concat();
            let at = *picks.pick(&places)?;
            let foreign = FOREIGN[picks.below(FOREIGN.len())];
            Some(splice(
                input,
                (at, at),
                format!("data: {foreign}\n\n").as_bytes(),
            ))
        }
        12 => Some(reencoded(input, picks.below(9))),
        _ => {
            // A clean cut-off: the stream ends at an event boundary before its last event.
            let boundaries = boundaries(input);
            let keep = *picks.pick(&boundaries[..boundaries.len().saturating_sub(1)])?;
            Some(input[..keep].to_vec())
        }
    }
}

/// `input`, read as UTF-8 (lossily), written again: 0 behind a UTF-8 byte-order mark, 1-4
/// UTF-16 LE/BE without and with a mark, 5-8 UTF-32 LE/BE likewise.
fn reencoded(input: &[u8], encoding: usize) -> Vec<u8> {
    let text = String::from_utf8_lossy(input);
    let mark = matches!(encoding, 3 | 4 | 7 | 8);
    let chars = mark.then_some('\u{feff}').into_iter().chain(text.chars());
    let utf16 = |c: char| c.encode_utf16(&mut [0; 2]).to_vec();
    match encoding {
        0 => [&b"\xEF\xBB\xBF"[..], text.as_bytes()].concat(),
        1 | 3 => chars.flat_map(utf16).flat_map(u16::to_le_bytes).collect(),
        2 | 4 => chars.flat_map(utf16).flat_map(u16::to_be_bytes).collect(),
        5 | 7 => chars.flat_map(|c| u32::from(c).to_le_bytes()).collect(),
        _ => chars.flat_map(|c| u32::from(c).to_be_bytes()).collect(),
    }
}

/// `input` with `range` replaced by `with`.
fn splice(input: &[u8], range: (usize, usize), with: &[u8]) -> Vec<u8> {
    [&input[..range.0], with, &input[range.1..]].concat()
}

/// The string tokens of a text (JSON, or the JSON in SSE data lines): from the opening quote
/// to after the closing one.
fn strings(text: &[u8]) -> Vec<(usize, usize)> {
    let mut tokens = Vec::new();
    let mut at = 0;
    while at < text.len() {
        if text[at] != b'"' {
            at += 1;
            continue;
        }
        let Some(end) = string_end(text, at) else {
            break;
        };
        tokens.push((at, end));
        at = end;
    }
    tokens
}

/// Where the string token that opens at `start` ends (after its closing quote).
fn string_end(text: &[u8], start: usize) -> Option<usize> {
    let mut at = start + 1;
    while at < text.len() {
        match text[at] {
            b'\\' => at += 2,
            b'"' => return Some(at + 1),
            _ => at += 1,
        }
    }
    None
}

/// An object key: its string token and where its value starts.
struct Key {
    token: (usize, usize),
    value: usize,
}

fn key(text: &[u8], token: (usize, usize)) -> Option<Key> {
    let after = skip_space(text, token.1);
    (text.get(after) == Some(&b':')).then(|| Key {
        token,
        value: skip_space(text, after + 1),
    })
}

fn skip_space(text: &[u8], mut at: usize) -> usize {
    while text
        .get(at)
        .is_some_and(|byte| matches!(byte, b' ' | b'\t'))
    {
        at += 1;
    }
    at
}

/// Where the JSON value that starts at `start` ends.
fn value_end(text: &[u8], start: usize) -> Option<usize> {
    match text.get(start)? {
        b'"' => string_end(text, start),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut at = start;
            while at < text.len() {
                match text[at] {
                    b'"' => {
                        at = string_end(text, at)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(at + 1);
                        }
                    }
                    _ => {}
                }
                at += 1;
            }
            None
        }
        _ => {
            let rest = &text[start..];
            let end = rest.iter().position(|byte| b",}] \t\r\n".contains(byte));
            Some(start + end.unwrap_or(rest.len()))
        }
    }
}

/// The key again with another value of the same shape, before it (the original wins for a
/// last-key reader) or after its value (the repeat wins).
fn duplicate_key(input: &[u8], key: &Key, before: bool) -> Option<Vec<u8>> {
    let end = value_end(input, key.value)?;
    let other: &[u8] = match input.get(key.value)? {
        b'"' => b"\"evil\"",
        b'[' => b"[]",
        b'{' => b"{\"type\":\"function\",\"name\":\"evil\"}",
        b'-' | b'0'..=b'9' => b"\"0\"",
        _ => b"\"evil\"",
    };
    let name = &input[key.token.0..key.token.1];
    let repeat = [name, b":", other].concat();
    Some(match before {
        true => splice(
            input,
            (key.token.0, key.token.0),
            &[&repeat[..], b","].concat(),
        ),
        false => splice(input, (end, end), &[&b","[..], &repeat].concat()),
    })
}

/// The key's value with another type: a string as a number or in an array, a number as a
/// string, a list as its first element, an object in a list.
fn confuse(input: &[u8], key: &Key, first_way: bool) -> Option<Vec<u8>> {
    let end = value_end(input, key.value)?;
    let value = &input[key.value..end];
    let confused: Vec<u8> = match (value.first()?, first_way) {
        (b'"', true) => b"42".to_vec(),
        (b'"', false) | (b'{', _) => [&b"["[..], value, b"]"].concat(),
        (b'[', _) => {
            let first = skip_space(input, key.value + 1);
            match value_end(input, first) {
                Some(first_end) if input[first] != b']' => input[first..first_end].to_vec(),
                _ => b"{}".to_vec(),
            }
        }
        _ => [&b"\""[..], value, b"\""].concat(),
    };
    Some(splice(input, (key.value, end), &confused))
}

const BAD_BYTES: [&[u8]; 4] = [b"\xFF", b"\xC0\xAF", b"\xE2\x82", b"\xED\xA0\x80"];

fn bad_utf8(input: &[u8], token: (usize, usize), picks: &mut Picks) -> Option<Vec<u8>> {
    let at = token.0 + 1 + picks.below(token.1 - token.0 - 1);
    let bad = BAD_BYTES[picks.below(BAD_BYTES.len())];
    Some(splice(input, (at, at), bad))
}

/// A string token with every character that is not already escaped written as `\uXXXX`; bytes
/// that are not UTF-8 stay as they are.
fn escaped(token: &[u8]) -> Vec<u8> {
    let inner = &token[1..token.len() - 1];
    let mut out = b"\"".to_vec();
    let mut at = 0;
    while at < inner.len() {
        if inner[at] == b'\\' {
            out.extend_from_slice(&inner[at..(at + 2).min(inner.len())]);
            at += 2;
            continue;
        }
        let width = match inner[at] {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        let end = (at + width).min(inner.len());
        match std::str::from_utf8(&inner[at..end]) {
            Ok(text) => {
                for unit in text.encode_utf16() {
                    out.extend_from_slice(format!("\\u{unit:04x}").as_bytes());
                }
                at = end;
            }
            Err(_) => {
                out.push(inner[at]);
                at += 1;
            }
        }
    }
    out.push(b'"');
    out
}

fn escape_all(input: &[u8], tokens: &[(usize, usize)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len() * 2);
    let mut last = 0;
    for &(start, end) in tokens {
        out.extend_from_slice(&input[last..start]);
        out.extend(escaped(&input[start..end]));
        last = end;
    }
    out.extend_from_slice(&input[last..]);
    out
}

/// The starts of the JSON documents: the text's own, and each data line's.
fn document_starts(input: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    for (at, _) in input.iter().enumerate().filter(|&(_, &byte)| byte == b'{') {
        let line_start = input[..at]
            .iter()
            .rposition(|&byte| byte == b'\n' || byte == b'\r')
            .map_or(0, |newline| newline + 1);
        let before = &input[line_start..at];
        if before.iter().all(u8::is_ascii_whitespace) || before == b"data:" || before == b"data: " {
            starts.push(at);
        }
    }
    starts
}

/// A `type` added to a document (a chat chunk or completion has none).
fn add_type(input: &[u8], picks: &mut Picks) -> Option<Vec<u8>> {
    let at = *picks.pick(&document_starts(input))? + 1;
    let kinds = [
        "chat.completion.chunk",
        "message",
        "content_block_delta",
        "response.output_text.delta",
    ];
    let kind = kinds[picks.below(kinds.len())];
    let empty = input.get(skip_space(input, at)) == Some(&b'}');
    let field = format!("\"type\":\"{kind}\"{}", if empty { "" } else { "," });
    Some(splice(input, (at, at), field.as_bytes()))
}

/// The whole input as the data of one event (a JSON answer sent as a stream).
fn as_event(input: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(input.len() + 16);
    for line in input.split(|&byte| byte == b'\n') {
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(line.strip_suffix(b"\r").unwrap_or(line));
        out.push(b'\n');
    }
    out.push(b'\n');
    out
}

/// Where events end: after each blank line.
fn boundaries(input: &[u8]) -> Vec<usize> {
    input
        .windows(2)
        .enumerate()
        .filter(|(_, pair)| pair == b"\n\n")
        .map(|(at, _)| at + 2)
        .collect()
}

/// An event's data cut in two: two events, or two `data:` lines of one event.
fn split_event(input: &[u8], picks: &mut Picks) -> Option<Vec<u8>> {
    let lines: Vec<usize> = document_starts(input)
        .into_iter()
        .filter(|&start| input[..start].ends_with(b"data: ") || input[..start].ends_with(b"data:"))
        .collect();
    let start = *picks.pick(&lines)?;
    let end = input[start..]
        .iter()
        .position(|&byte| byte == b'\n' || byte == b'\r')
        .map_or(input.len(), |length| start + length);
    let at = start + picks.below(end - start + 1);
    let cut: &[u8] = if picks.below(2) == 0 {
        b"\n\ndata: "
    } else {
        b"\ndata: "
    };
    Some(splice(input, (at, at), cut))
}

/// Call events of every format, each naming a tool of its own.
const FOREIGN: [&str; 7] = [
    r#"{"type":"response.output_item.added","output_index":7,"item":{"id":"fc_f","type":"function_call","call_id":"c_f","name":"foreign_added","arguments":"{}"}}"#,
    r#"{"type":"response.output_item.done","output_index":7,"item":{"id":"fc_f","type":"function_call","call_id":"c_f","name":"foreign_done","arguments":"{}"}}"#,
    r#"{"type":"response.completed","response":{"output":[{"type":"function_call","call_id":"c_f","name":"foreign_completed","arguments":"{}"}]}}"#,
    r#"{"type":"content_block_start","index":7,"content_block":{"type":"tool_use","id":"toolu_f","name":"foreign_block","input":{}}}"#,
    r#"{"type":"message_start","message":{"type":"message","content":[{"type":"tool_use","id":"toolu_f","name":"foreign_start","input":{}}]}}"#,
    r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":7,"id":"call_f","type":"function","function":{"name":"foreign_chunk","arguments":"{}"}}]}}]}"#,
    r#"{"choices":[{"index":3,"delta":{"function_call":{"name":"foreign_legacy","arguments":"{}"}}}]}"#,
];
