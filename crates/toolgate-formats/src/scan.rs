//! A quick reading of a JSON object's top level: where each member's key and value lie, for a
//! request reader that wants a few small fields and must not hand serde_json the whole
//! conversation to skip. It checks everything serde_json checks of a value it skips, and
//! declines whatever it cannot read exactly (a key written with escapes, nesting deeper than
//! [`MAX_DEPTH`], any malformed byte): whatever it accepts, serde_json accepts with the same
//! members. A property test here and the `request_adapters` fuzz target hold that; a caller
//! reads a declined body with serde_json, which says why. The text of one JSON string
//! ([`string_text`]) is read here too, for the same reason, under the same rule: exactly as
//! serde_json reads it, or not at all.

use std::ops::Range;

use crate::string_blocks;

/// The deepest nesting the scan follows; deeper bodies are declined.
const MAX_DEPTH: u32 = 128;

/// A run of plain text between two escapes shorter than this marks a string as escaped text,
/// skipped by blocks from there on.
const DENSE_RUN: usize = 32;

/// Calls `member` with each top-level member of the JSON object `body` (its key as written,
/// which has no escapes, and where its value lies), in order, repeated keys included. `None`
/// when `body` is not one whole JSON object, or a key has escapes; the members already passed
/// to `member` are then to be dropped.
///
/// `known` may spare the scan a value: given a key and where its value starts, it returns
/// where the value ends if the bytes there are a whole JSON value the caller has read before
/// (a cached `tools` array, compared byte for byte).
pub(crate) fn object_members(
    body: &[u8],
    mut known: impl FnMut(&[u8], usize) -> Option<usize>,
    mut member: impl FnMut(&[u8], Range<usize>),
) -> Option<()> {
    let mut cursor = Cursor::new(body);
    cursor.object(|key, cursor| {
        let value_start = cursor.at();
        match known(key, value_start) {
            Some(end) if end > value_start && end <= body.len() => cursor.scan.at = end,
            _ => {
                cursor.skip()?;
            }
        }
        member(key, value_start..cursor.at());
        Some(())
    })?;
    cursor.finish()
}

/// A reader's place in JSON text, for readers that descend into a few members and skip the
/// rest (a model's answer): every byte checked as [`object_members`] checks it, nothing
/// allocated, and `None` for whatever it cannot read exactly (a key written with escapes, a
/// value of another shape than the reader expects), which the caller then reads with
/// serde_json. A member or item handed to the reader's closure must be read or skipped whole.
pub(crate) struct Cursor<'a> {
    scan: Scanner<'a>,
    /// The containers the reader is inside: a skipped value may nest only as deep as is left,
    /// so nothing serde_json refuses as too deep is accepted here.
    depth: u32,
}

impl<'a> Cursor<'a> {
    /// At the first value of `text`, past any whitespace.
    pub(crate) fn new(text: &'a [u8]) -> Self {
        let mut scan = Scanner { bytes: text, at: 0 };
        scan.whitespace();
        Cursor { scan, depth: 0 }
    }

    pub(crate) fn at(&self) -> usize {
        self.scan.at
    }

    /// The object here, each member handed to `member`: its key as written (which has no
    /// escapes) and the cursor at its value.
    pub(crate) fn object(
        &mut self,
        mut member: impl FnMut(&'a [u8], &mut Self) -> Option<()>,
    ) -> Option<()> {
        self.items(b'{', b'}', |cursor| {
            let scan = &mut cursor.scan;
            scan.eat(b'"')?;
            let key_start = scan.at;
            if scan.string()? {
                return None;
            }
            let key = scan.bytes.get(key_start..scan.at - 1)?;
            scan.whitespace();
            scan.eat(b':')?;
            scan.whitespace();
            member(key, cursor)
        })
    }

    /// The array here, the cursor handed to `item` at each of its values.
    pub(crate) fn array(&mut self, item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.items(b'[', b']', item)
    }

    /// The container opened by `open` here, the cursor handed to `item` at each of its items
    /// (a value, or an object's member from its key), which are apart by commas.
    #[inline(always)]
    fn items(
        &mut self,
        open: u8,
        close: u8,
        mut item: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        self.scan.eat(open)?;
        self.enter()?;
        self.scan.whitespace();
        if self.scan.eat(close).is_none() {
            loop {
                item(self)?;
                self.scan.whitespace();
                match self.scan.next()? {
                    b',' => self.scan.whitespace(),
                    byte if byte == close => break,
                    _ => return None,
                }
            }
        }
        self.depth -= 1;
        Some(())
    }

    fn enter(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth < MAX_DEPTH).then_some(())
    }

    /// The value here, whatever it is: where it is written.
    pub(crate) fn skip(&mut self) -> Option<Range<usize>> {
        let start = self.scan.at;
        self.scan.value(MAX_DEPTH - 1 - self.depth)?;
        Some(start..self.scan.at)
    }

    /// Takes a `null` here; `false` (and nothing taken) for any other value.
    pub(crate) fn null(&mut self) -> bool {
        self.scan.peek() == Some(b'n') && self.scan.literal(b"null").is_some()
    }

    /// The string here: where it is written, quotes and escapes included; `None` for any other
    /// value.
    pub(crate) fn string(&mut self) -> Option<Range<usize>> {
        let start = self.scan.at;
        self.scan.eat(b'"')?;
        self.scan.string()?;
        Some(start..self.scan.at)
    }

    /// Past the value: only whitespace is left.
    pub(crate) fn finish(mut self) -> Option<()> {
        self.scan.whitespace();
        (self.scan.at == self.scan.bytes.len()).then_some(())
    }
}

/// Whether the scan reads `body` as a JSON object, every value scanned: for the benchmark that
/// sets the scan beside serde_json's skip.
#[doc(hidden)]
pub fn scans_as_object(body: &[u8]) -> bool {
    object_members(body, |_, _| None, |_, _| {}).is_some()
}

/// Where the JSON string `written` starts with ends (just past its closing quote): as the scan
/// skips it (by runs, or by blocks once its escapes come close), and as the block skip does from
/// its first byte. For the `string_skip` fuzz target, which holds both to serde_json.
#[doc(hidden)]
pub fn string_ends(written: &[u8]) -> [Option<usize>; 2] {
    let mut scan = Scanner {
        bytes: written,
        at: 0,
    };
    let by_scan = scan.eat(b'"').and_then(|()| scan.string()).map(|_| scan.at);
    let by_blocks = written
        .first()
        .filter(|&&byte| byte == b'"')
        .and_then(|_| string_blocks::string_end(written, 1));
    [by_scan, by_blocks]
}

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.at += 1;
        Some(byte)
    }

    /// Takes `byte` if it is next.
    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek() == Some(byte)).then(|| self.at += 1)
    }

    #[inline(always)]
    fn whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\n' | b'\t' | b'\r')) {
            self.at += 1;
        }
    }

    /// One whole value from here, nested values included, at most `max_depth` containers
    /// deep. The containers open are a bit stack (set: an object), so the scan allocates
    /// nothing.
    fn value(&mut self, max_depth: u32) -> Option<()> {
        // The walk moves a copy, which lives in registers, and writes its place back once:
        // through `&mut self`, each byte taken would be a store and a reload.
        let mut copy = Scanner {
            bytes: self.bytes,
            at: self.at,
        };
        copy.walk_value(max_depth)?;
        self.at = copy.at;
        Some(())
    }

    /// [`Scanner::value`]'s walk, inlined into it so its scanner stays in registers.
    #[inline(always)]
    fn walk_value(&mut self, max_depth: u32) -> Option<()> {
        let mut depth = 0u32;
        let mut objects = 0u128;
        loop {
            // A value is due.
            match self.next()? {
                open @ (b'{' | b'[') => {
                    if depth >= max_depth {
                        return None;
                    }
                    objects = (objects << 1) | u128::from(open == b'{');
                    depth += 1;
                    self.whitespace();
                    if self.eat(if open == b'{' { b'}' } else { b']' }).is_some() {
                        // Empty: it is the value that ended.
                        depth -= 1;
                        objects >>= 1;
                    } else if open == b'{' {
                        self.key()?;
                        continue;
                    } else {
                        continue;
                    }
                }
                b'"' => {
                    self.string()?;
                }
                b't' => self.literal(b"rue")?,
                b'f' => self.literal(b"alse")?,
                b'n' => self.literal(b"ull")?,
                b'-' => self.number(None)?,
                digit @ b'0'..=b'9' => self.number(Some(digit))?,
                _ => return None,
            }
            // A value ended: a comma, or the end of its container (and perhaps of theirs).
            loop {
                if depth == 0 {
                    return Some(());
                }
                self.whitespace();
                let in_object = objects & 1 == 1;
                match self.next()? {
                    b',' => {
                        self.whitespace();
                        if in_object {
                            self.key()?;
                        }
                        break;
                    }
                    b'}' if in_object => {}
                    b']' if !in_object => {}
                    _ => return None,
                }
                depth -= 1;
                objects >>= 1;
            }
        }
    }

    /// A key written `"key":` in the next 16 bytes, taken with its colon: where its text ends
    /// (its closing quote). Most keys are short and written so; the quotes and the colon are
    /// found in one test, the text checked as a string's (no escape, no control character).
    /// `None`, and nothing taken, for any other key.
    #[inline(always)]
    fn short_key(&mut self) -> Option<usize> {
        let chunk = self.bytes.get(self.at..)?.first_chunk::<16>()?;
        let after_opening = string_blocks::plain_stops_16(chunk) & !1;
        if chunk[0] != b'"' || after_opening == 0 {
            return None;
        }
        let closing = after_opening.trailing_zeros() as usize;
        if chunk[closing] != b'"' || chunk.get(closing + 1) != Some(&b':') {
            return None;
        }
        let end = self.at + closing;
        self.at = end + 2;
        Some(end)
    }

    /// An object's key and its colon, and the whitespace up to the value.
    #[inline(always)]
    fn key(&mut self) -> Option<()> {
        if self.short_key().is_some() {
            self.whitespace();
            return Some(());
        }
        self.eat(b'"')?;
        self.string()?;
        self.whitespace();
        self.eat(b':')?;
        self.whitespace();
        Some(())
    }

    /// The rest of a string after its opening quote, up to and with its closing one. `true`
    /// when it has escapes.
    ///
    /// Runs of plain text are found 16 bytes at a time ([`plain_run`]); once two escapes come
    /// closer than [`DENSE_RUN`] bytes apart, the string is escaped text (JSON in a string,
    /// code), where runs are short, and its rest is skipped 64 bytes at a time
    /// ([`string_blocks`]). What the bytes are chooses, and both ways refuse the same strings.
    /// Inlined into each reader of values and keys: most strings are short, and a call costs
    /// as much as reading one.
    #[inline(always)]
    fn string(&mut self) -> Option<bool> {
        let mut escaped = false;
        loop {
            let run = plain_run(self.bytes.get(self.at..)?);
            self.at += run;
            match self.next()? {
                b'"' => return Some(escaped),
                b'\\' => {
                    let dense = escaped && run < DENSE_RUN;
                    escaped = true;
                    self.escape()?;
                    if dense {
                        self.at = string_blocks::string_end(self.bytes, self.at)?;
                        return Some(true);
                    }
                }
                // A control character, which JSON strings must escape.
                _ => return None,
            }
        }
    }

    /// The rest of an escape after its backslash. Inlined, as the number and literal readers
    /// below are: a call would take the walk's scanner by its address and keep its place in
    /// memory instead of a register.
    #[inline(always)]
    fn escape(&mut self) -> Option<()> {
        match self.next()? {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => Some(()),
            b'u' => {
                let hex = self.bytes.get(self.at..self.at + 4)?;
                self.at += 4;
                hex.iter().all(u8::is_ascii_hexdigit).then_some(())
            }
            _ => None,
        }
    }

    #[inline(always)]
    fn literal(&mut self, rest: &[u8]) -> Option<()> {
        let end = self.at + rest.len();
        (self.bytes.get(self.at..end)? == rest).then(|| self.at = end)
    }

    /// The rest of a number after its first byte (`None`: a minus sign).
    #[inline(always)]
    fn number(&mut self, first: Option<u8>) -> Option<()> {
        let first = match first {
            Some(digit) => digit,
            None => self.next()?,
        };
        match first {
            // One leading zero only: `01` is no number.
            b'0' => {
                if self.peek().is_some_and(|byte| byte.is_ascii_digit()) {
                    return None;
                }
            }
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.eat(b'.').is_some() {
            self.at_least_one_digit()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            self.at_least_one_digit()?;
        }
        Some(())
    }

    #[inline(always)]
    fn digits(&mut self) {
        while self.peek().is_some_and(|byte| byte.is_ascii_digit()) {
            self.at += 1;
        }
    }

    #[inline(always)]
    fn at_least_one_digit(&mut self) -> Option<()> {
        let start = self.at;
        self.digits();
        (self.at > start).then_some(())
    }
}

/// The text a JSON string stands for, given as written (quotes included): a call's arguments,
/// which a model writes as a JSON string of JSON, a quote escaped every few bytes, where
/// serde_json's unescaping looks for the next escape from scratch after each one. `None` for
/// anything that is not one JSON string, and for a `\u` escape of a surrogate (a pair of them
/// is one character, a lone one an error): the caller reads those with serde_json.
pub fn string_text(written: &str) -> Option<String> {
    let inner = written.strip_prefix('"')?.strip_suffix('"')?.as_bytes();
    // The text is never longer than what it is written as (an escape is as long as what it
    // stands for, or longer); room for 16 bytes more lets plain text be copied 16 bytes at a
    // time, a chunk's bytes past its run overwritten by what follows.
    let mut text = vec![0; inner.len() + 16];
    let (mut read, mut wrote) = (0, 0);
    loop {
        let run = match inner.get(read..).and_then(<[u8]>::first_chunk::<16>) {
            Some(chunk) => {
                text.get_mut(wrote..wrote + 16)?.copy_from_slice(chunk);
                match string_blocks::plain_stops_16(chunk) {
                    0 => {
                        read += 16;
                        wrote += 16;
                        continue;
                    }
                    stops => stops.trailing_zeros() as usize,
                }
            }
            None => {
                let rest = &inner[read..];
                let run = plain_run(rest);
                text.get_mut(wrote..wrote + run)?
                    .copy_from_slice(&rest[..run]);
                run
            }
        };
        read += run;
        wrote += run;
        match inner.get(read) {
            None => break,
            Some(b'\\') => {}
            // A quote or control character, which a string holds only escaped.
            Some(_) => return None,
        }
        let (character, length) = match *inner.get(read + 1)? {
            b'"' => ('"', 2),
            b'\\' => ('\\', 2),
            b'/' => ('/', 2),
            b'b' => ('\u{8}', 2),
            b'f' => ('\u{c}', 2),
            b'n' => ('\n', 2),
            b'r' => ('\r', 2),
            b't' => ('\t', 2),
            b'u' => {
                let hex = inner.get(read + 2..read + 6)?;
                let code = hex.iter().try_fold(0, |code, &digit| {
                    Some(code * 16 + char::from(digit).to_digit(16)?)
                })?;
                // A surrogate is no character: the caller reads it with serde_json.
                (char::from_u32(code)?, 6)
            }
            _ => return None,
        };
        let encoded = character.len_utf8();
        character.encode_utf8(text.get_mut(wrote..wrote + encoded)?);
        read += length;
        wrote += encoded;
    }
    text.truncate(wrote);
    String::from_utf8(text).ok()
}

/// How many bytes from the start of `bytes` a string holds as they are: up to the first quote,
/// backslash or control character. Most runs are short (a key, a name, the text between two
/// escapes): 16 bytes at a time finds where one ends in a few instructions; past 32 bytes the
/// run is long (a conversation is mostly long strings) and the rest is looked through 64
/// bytes a test ([`string_blocks::plain_end`]). The body's last bytes go a word at a time.
fn plain_run(bytes: &[u8]) -> usize {
    const LONG: usize = 32;
    let mut run = 0;
    while let Some(chunk) = bytes.get(run..).and_then(<[u8]>::first_chunk::<16>) {
        let stops = string_blocks::plain_stops_16(chunk);
        if stops != 0 {
            return run + stops.trailing_zeros() as usize;
        }
        run += 16;
        if run == LONG {
            return string_blocks::plain_end(bytes, run);
        }
    }
    while let Some(word) = word_at(bytes, run) {
        let stops = run_stops(word);
        if stops != 0 {
            return run + (stops.trailing_zeros() / 8) as usize;
        }
        run += 8;
    }
    let rest = &bytes[run..];
    run + rest
        .iter()
        .position(|&byte| ends_plain_run(byte))
        .unwrap_or(rest.len())
}

/// The eight bytes at `at`, the first in the lowest bits.
fn word_at(bytes: &[u8], at: usize) -> Option<u64> {
    let word = bytes.get(at..)?.first_chunk::<8>()?;
    Some(u64::from_le_bytes(*word))
}

/// The high bit of every byte of `word` that ends a plain run, exact for the lowest such byte
/// (a borrow may mark bytes above it too, so only the lowest counts).
fn run_stops(word: u64) -> u64 {
    const ONES: u64 = u64::MAX / 255;
    const HIGH_BITS: u64 = ONES << 7;
    let below = |word: u64, bound: u8| word.wrapping_sub(ONES * u64::from(bound)) & !word;
    let control = below(word, 0x20);
    let quote = below(word ^ (ONES * u64::from(b'"')), 1);
    let backslash = below(word ^ (ONES * u64::from(b'\\')), 1);
    (control | quote | backslash) & HIGH_BITS
}

fn ends_plain_run(byte: u8) -> bool {
    matches!(byte, b'"' | b'\\') || byte < 0x20
}

#[cfg(test)]
mod tests {
    use super::*;

    use proptest::prelude::*;
    use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, Visitor};
    use serde_json::value::RawValue;

    /// The members the scan reads: each key and its value's text.
    fn scanned(body: &[u8]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut members = Vec::new();
        object_members(
            body,
            |_, _| None,
            |key, value| members.push((key.to_vec(), body[value].to_vec())),
        )?;
        Some(members)
    }

    /// serde_json's reading of a top-level object, every member kept in order.
    struct Members(Vec<(String, Box<RawValue>)>);

    impl<'de> Deserialize<'de> for Members {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct MembersVisitor;
            impl<'de> Visitor<'de> for MembersVisitor {
                type Value = Members;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Members, A::Error> {
                    let mut members = Vec::new();
                    while let Some(member) = map.next_entry()? {
                        members.push(member);
                    }
                    Ok(Members(members))
                }
            }
            deserializer.deserialize_map(MembersVisitor)
        }
    }

    /// What must hold of any bytes: what the scan accepts, serde_json accepts as a value it
    /// skips, and (when it is text, which serde_json needs to hand out members' text) reads as
    /// an object with the same members.
    fn assert_no_wider_than_serde(body: &[u8]) -> Result<(), TestCaseError> {
        let Some(members) = scanned(body) else {
            return Ok(());
        };
        prop_assert!(
            serde_json::from_slice::<IgnoredAny>(body).is_ok(),
            "serde_json refuses what the scan accepts: {:?}",
            String::from_utf8_lossy(body)
        );
        if let Ok(text) = std::str::from_utf8(body) {
            let reference: Members = serde_json::from_str(text)
                .map_err(|error| TestCaseError::fail(format!("{error}: {text}")))?;
            let reference: Vec<(Vec<u8>, Vec<u8>)> = (reference.0.into_iter())
                .map(|(key, value)| (key.into_bytes(), value.get().as_bytes().to_vec()))
                .collect();
            prop_assert_eq!(members, reference, "{}", text);
        }
        Ok(())
    }

    /// JSON values with the strings a conversation has: escapes of every kind, text that is
    /// not ASCII, control characters escaped.
    fn value() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::Bool),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>().prop_map(serde_json::Value::from),
            "(\\PC|[\"\\\\/\\x00-\\x1f\u{7f}-\u{10ffff}]){0,40}"
                .prop_map(serde_json::Value::String),
        ];
        leaf.prop_recursive(6, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::Array),
                prop::collection::vec((nested_key(), inner), 0..6)
                    .prop_map(|members| serde_json::Value::Object(members.into_iter().collect())),
            ]
        })
    }

    /// A key inside a value, which the walk reads whole (`Scanner::key`): short and long around
    /// the 16 bytes read at once, with escapes, control characters (written escaped) and text
    /// that is not ASCII at every place.
    fn nested_key() -> impl Strategy<Value = String> {
        prop_oneof![
            2 => "[a-z_]{0,8}",
            1 => "[a-z_]{9,20}",
            1 => "(\\PC|[\"\\\\\\x00-\\x1f]){0,18}",
        ]
    }

    /// A request-like object of `value`s, written compact or pretty.
    fn object_text() -> impl Strategy<Value = Vec<u8>> {
        (
            prop::collection::vec(("[a-z_]{0,8}", value()), 0..6),
            any::<bool>(),
        )
            .prop_map(|(members, pretty)| {
                let object = serde_json::Value::Object(members.into_iter().collect());
                if pretty {
                    serde_json::to_vec_pretty(&object).expect("writes")
                } else {
                    serde_json::to_vec(&object).expect("writes")
                }
            })
    }

    /// A request-like object whose strings are JSON texts written in strings, once or twice
    /// (an agent's arguments and tool results): escapes a few bytes apart, runs of backslashes,
    /// long enough to be skipped by blocks.
    fn escaped_documents() -> impl Strategy<Value = Vec<u8>> {
        let document = value().prop_map(|value| {
            let once = value.to_string();
            let twice = serde_json::Value::String(once.clone()).to_string();
            [once, twice]
        });
        prop::collection::vec(("[a-z_]{0,8}", document, 0..2usize), 0..6).prop_map(|members| {
            let object: serde_json::Map<String, serde_json::Value> = members
                .into_iter()
                .map(|(key, texts, which)| (key, serde_json::Value::String(texts[which].clone())))
                .collect();
            serde_json::to_vec(&object).expect("writes")
        })
    }

    /// Half plain request-like objects, half agent-like ones of escaped documents.
    fn documents() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![object_text(), escaped_documents()]
    }

    /// A change to a JSON text that may break it: a byte replaced, inserted or removed (bytes
    /// JSON gives meaning to, and some it forbids), or the text cut short.
    #[derive(Debug, Clone)]
    enum Damage {
        Replace(prop::sample::Index, u8),
        Insert(prop::sample::Index, u8),
        Remove(prop::sample::Index),
        Cut(prop::sample::Index),
    }

    fn damage() -> impl Strategy<Value = Damage> {
        let byte = prop_oneof![
            prop::sample::select(b"\"\\{}[],: \t\n0123456789-+.eEtrufalsnbx/".to_vec()),
            any::<u8>(),
        ];
        prop_oneof![
            (any::<prop::sample::Index>(), byte.clone()).prop_map(|(at, b)| Damage::Replace(at, b)),
            (any::<prop::sample::Index>(), byte).prop_map(|(at, b)| Damage::Insert(at, b)),
            any::<prop::sample::Index>().prop_map(Damage::Remove),
            any::<prop::sample::Index>().prop_map(Damage::Cut),
        ]
    }

    fn apply(text: &mut Vec<u8>, damage: &Damage) {
        if text.is_empty() {
            return;
        }
        match damage {
            Damage::Replace(at, byte) => {
                let at = at.index(text.len());
                text[at] = *byte;
            }
            Damage::Insert(at, byte) => text.insert(at.index(text.len() + 1), *byte),
            Damage::Remove(at) => {
                text.remove(at.index(text.len()));
            }
            Damage::Cut(at) => text.truncate(at.index(text.len())),
        }
    }

    /// A JSON string as a model may write one: plain text, every escape (hex in either case,
    /// surrogates paired and lone), and now and then what no string holds as it is.
    fn string_written() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            6 => "[a-z é€😀{}:,]{1,8}",
            1 => "[a-z é€😀{}:,]{9,40}",
            4 => prop::sample::select(vec![r#"\""#, r"\\", r"\/", r"\b", r"\f", r"\n", r"\r", r"\t"])
                .prop_map(str::to_owned),
            2 => "\\\\u[0-9a-fA-F]{4}",
            1 => "\\\\u[dD][89a-fA-F][0-9a-fA-F]{2}",
            1 => prop::sample::select(vec!["\"", "\\", r"\x", "\u{1}", "\u{1f}", r"\u12", r"\u12g4", r"\u+04a"])
                .prop_map(str::to_owned),
        ];
        prop::collection::vec(piece, 0..12).prop_map(|pieces| format!("\"{}\"", pieces.concat()))
    }

    /// Whether `written` has a `\u` escape of a surrogate (or text that looks like one).
    fn has_surrogate_escape(written: &str) -> bool {
        let lower = written.to_lowercase();
        ["8", "9", "a", "b", "c", "d", "e", "f"]
            .iter()
            .any(|second| lower.contains(&format!(r"\ud{second}")))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]

        #[test]
        fn a_string_reads_as_serde_json_reads_it(written in string_written()) {
            match (string_text(&written), serde_json::from_str::<String>(&written)) {
                (Some(text), Ok(serde_text)) => prop_assert_eq!(text, serde_text),
                (Some(text), Err(error)) => {
                    prop_assert!(false, "{written}: read as {text:?}, serde_json: {error}")
                }
                (None, Ok(_)) => prop_assert!(has_surrogate_escape(&written), "{written}: declined"),
                (None, Err(_)) => {}
            }
        }

        #[test]
        fn every_string_serde_json_writes_reads_back(text in any::<String>()) {
            let written = serde_json::to_string(&text).expect("a string is written");
            prop_assert_eq!(string_text(&written), Some(text));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        #[test]
        fn the_scan_reads_every_document_serde_json_writes_as_serde_json_does(text in documents()) {
            prop_assert!(scanned(&text).is_some(), "{}", String::from_utf8_lossy(&text));
            assert_no_wider_than_serde(&text)?;
        }

        #[test]
        fn the_scan_accepts_no_damaged_document_serde_json_refuses(
            text in documents(),
            damages in prop::collection::vec(damage(), 1..4),
        ) {
            let mut text = text;
            for damage in &damages {
                apply(&mut text, damage);
            }
            assert_no_wider_than_serde(&text)?;
        }

        /// Nested keys of every length around the 16 bytes the walk reads a short key in, a
        /// hostile byte (a backslash, a control character, a quote, a colon, a byte that is not
        /// UTF-8) anywhere in them, closed or not, the colon written close, spaced or missing:
        /// read exactly as serde_json reads them, and whatever serde_json reads, read.
        #[test]
        fn nested_keys_around_sixteen_bytes_read_as_serde_json_reads_them(
            lead in "[a-z]{0,20}",
            hostile in prop::sample::select(vec![b'\\', b'\x01', b'\x1f', b'\t', b'"', b':', 0xff, b'a']),
            at in any::<prop::sample::Index>(),
            closing in prop::sample::select(vec![&b"\""[..], b""]),
            colon in prop::sample::select(vec![&b":"[..], b" :", b""]),
        ) {
            let mut key = lead.into_bytes();
            key.insert(at.index(key.len() + 1), hostile);
            let body = [&b"{\"k\":{\""[..], &key, closing, colon, b"1}}"].concat();
            assert_no_wider_than_serde(&body)?;
            if serde_json::from_slice::<IgnoredAny>(&body).is_ok() {
                prop_assert!(scanned(&body).is_some(), "{}", String::from_utf8_lossy(&body));
            }
        }
    }

    #[test]
    fn what_the_scan_declines() {
        let declined: &[&[u8]] = &[
            b"",
            b"[]",
            b"{\"a\":1,}",
            b"{\"a\":1} x",
            b"{\"a\" 1}",
            b"{\"a\\u0062\":1}",
            b"{\"a\":01}",
            b"{\"a\":-}",
            b"{\"a\":1.}",
            b"{\"a\":1e}",
            b"{\"a\":.5}",
            b"{\"a\":tru}",
            b"{\"a\":\"\\x\"}",
            b"{\"a\":\"\\u12g4\"}",
            b"{\"a\":\"\t\"}",
            b"{\"a\":[1 2]}",
            b"{\"a\":{\"b\"}}",
            b"{\"a\":{1:2}}",
            b"{\"a\":[}",
            b"{\"a\":\"no end}",
        ];
        for body in declined {
            assert!(scanned(body).is_none(), "{}", String::from_utf8_lossy(body));
            assert!(serde_json::from_slice::<Members>(body).is_err() || body.contains(&b'\\'));
        }
        // Whatever nesting the scan follows, serde_json follows too; the scan declines what is
        // deeper than it follows, and serde_json reads that.
        for depth in 100..140 {
            let nested = format!("{{\"a\":{}{}}}", "[".repeat(depth), "]".repeat(depth));
            let by_serde = serde_json::from_str::<Members>(&nested).is_ok();
            if scanned(nested.as_bytes()).is_some() {
                assert!(by_serde, "{depth} deep");
            }
        }
        let deepest = format!("{{\"a\":{}{}}}", "[".repeat(120), "]".repeat(120));
        assert!(scanned(deepest.as_bytes()).is_some());
    }

    #[test]
    fn the_members_are_where_they_are_written() {
        let body = b" {\"model\" : \"m\",\"messages\":[{\"content\":\"a \\\"quote\\\" \\u00e9\"}], \"model\":null }\n";
        let members = scanned(body).expect("an object");
        let keys: Vec<&[u8]> = members.iter().map(|(key, _)| key.as_slice()).collect();
        assert_eq!(keys, [&b"model"[..], b"messages", b"model"]);
        assert_eq!(members[0].1, b"\"m\"");
        assert_eq!(members[2].1, b"null");
        // Not UTF-8 in a value: serde_json skips such a value too.
        let latin1 = b"{\"content\":\"caf\xe9\"}";
        assert!(scanned(latin1).is_some());
        assert!(serde_json::from_slice::<IgnoredAny>(latin1).is_ok());
    }
}
