//! An incremental Server-Sent Events parser that keeps each event's exact bytes, so released
//! events reach the client byte for byte. Line endings, fields and comments follow the WHATWG
//! `text/event-stream` rules; each byte is searched once however the stream is chunked.

use std::borrow::Cow;

use bytes::{Bytes, BytesMut};

/// One event: its fields as parsed, and the exact bytes it occupied in the stream, including
/// the blank line that ended it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`; `None` for an event without data (comments only).
    pub data: Option<String>,
    /// The event's exact bytes in the stream, its ending blank line included.
    pub raw: Bytes,
}

impl SseEvent {
    /// The first line of this event that is not event-stream text a client reads the same way
    /// toolgate does: a NUL byte (UTF-16 or UTF-32 text, which some clients decode), bytes that
    /// are not UTF-8, or a field no event stream defines (a JSON document under an event-stream
    /// content type is one). A leading byte-order mark is allowed, as at a stream's start.
    pub fn foreign_line(&self) -> Option<&'static str> {
        let raw = self.raw.strip_prefix(BYTE_ORDER_MARK).unwrap_or(&self.raw);
        if memchr::memchr(0, raw).is_some() {
            return Some("a NUL byte (text in UTF-16 or UTF-32, not UTF-8)");
        }
        if std::str::from_utf8(raw).is_err() {
            return Some("bytes that are not UTF-8");
        }
        raw.split(|byte| *byte == b'\n' || *byte == b'\r')
            .filter(|line| !line.is_empty() && line.first() != Some(&b':'))
            .find(|line| {
                let field = line
                    .iter()
                    .position(|&byte| byte == b':')
                    .map_or(&line[..], |colon| &line[..colon]);
                !matches!(field, b"data" | b"event" | b"id" | b"retry")
            })
            .map(|_| "a line that is no event-stream field")
    }
}

/// Splits a byte stream into events, however the bytes are chunked.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of the event being read; complete events are split off the front as `raw`.
    buffer: BytesMut,
    /// Where the line being read starts in `buffer`.
    line_start: usize,
    /// How far `buffer` has been searched for a line end, so a push never searches it again.
    scanned: usize,
    /// The last line ended with a `\r` that was the last byte buffered: a `\n` arriving next is
    /// the rest of that line ending, not a blank line.
    after_cr: bool,
    /// That `\r` ended a blank line. The event is held until the next byte shows whether a `\n`
    /// belongs to it, so event boundaries do not depend on where the chunks were cut.
    blank_after_cr: bool,
    /// A line has been read; a byte-order mark is skipped only before the first one.
    started: bool,
    fields: EventFields,
}

/// The fields of the event being read, filled line by line.
#[derive(Debug, Default)]
struct EventFields {
    event: Option<String>,
    data: Option<String>,
}

const BYTE_ORDER_MARK: &[u8] = b"\xEF\xBB\xBF";

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        SseParser::default()
    }

    /// Feeds a chunk; returns the events it completed.
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseEvent> {
        let mut events = Vec::new();
        if chunk.is_empty() {
            return events;
        }
        self.buffer.extend_from_slice(chunk);
        if self.after_cr {
            self.after_cr = false;
            if self.buffer.get(self.scanned) == Some(&b'\n') {
                self.scanned += 1;
                self.line_start = self.scanned;
            }
            if self.blank_after_cr {
                self.blank_after_cr = false;
                events.push(self.dispatch(self.scanned));
            }
        }
        let mut searched = self.buffer.get(self.scanned..).unwrap_or_default();
        while let Some(offset) = find_line_end(searched) {
            let line_end = self.scanned + offset;
            let mut next = line_end + 1;
            if self.buffer.get(line_end) == Some(&b'\r') {
                match self.buffer.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            let blank = self.read_line(line_end);
            self.scanned = next;
            self.line_start = next;
            if blank {
                if self.after_cr {
                    self.blank_after_cr = true;
                    return events;
                }
                events.push(self.dispatch(next));
            }
            searched = self.buffer.get(self.scanned..).unwrap_or_default();
        }
        self.scanned = self.buffer.len();
        events
    }

    /// At end of input: the trailing bytes that did not end with a blank line, as an event.
    pub fn finish(&mut self) -> Option<SseEvent> {
        self.after_cr = false;
        self.blank_after_cr = false;
        if self.buffer.is_empty() {
            return None;
        }
        let end = self.buffer.len();
        if self.line_start < end {
            self.read_line(end);
        }
        Some(self.dispatch(end))
    }

    /// Bytes held that do not yet form a complete event (for the body-size cap).
    pub fn buffered_len(&self) -> usize {
        self.buffer.len()
    }

    /// Reads the line from `line_start` to `line_end` (its ending excluded) into the event's
    /// fields; returns true for a blank line, which ends the event.
    fn read_line(&mut self, line_end: usize) -> bool {
        let mut line = self
            .buffer
            .get(self.line_start..line_end)
            .unwrap_or_default();
        if !self.started {
            self.started = true;
            line = line.strip_prefix(BYTE_ORDER_MARK).unwrap_or(line);
        }
        if line.is_empty() {
            return true;
        }
        self.fields.read(line);
        false
    }

    /// Splits the event that ends at `end` off the buffer.
    fn dispatch(&mut self, end: usize) -> SseEvent {
        let raw = self.buffer.split_to(end.min(self.buffer.len())).freeze();
        self.scanned -= end.min(self.scanned);
        self.line_start -= end.min(self.line_start);
        SseEvent {
            event: self.fields.event.take(),
            data: self.fields.data.take(),
            raw,
        }
    }
}

impl EventFields {
    /// One non-blank line: a comment, or `field`, `field:value`, `field: value`.
    fn read(&mut self, line: &[u8]) {
        if line.first() == Some(&b':') {
            return;
        }
        let (field, value) = match line.iter().position(|&byte| byte == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        // Line endings are ASCII and never inside a UTF-8 sequence, so decoding line by line is
        // the same as decoding the stream; invalid bytes become U+FFFD, as the spec says.
        // `from_utf8` first: it is several times faster than the lossy decoder on valid text.
        let value = match std::str::from_utf8(value) {
            Ok(text) => Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(value),
        };
        match field {
            b"data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(&value);
                }
                None => self.data = Some(value.into_owned()),
            },
            b"event" => self.event = Some(Cow::into_owned(value)),
            // `id`, `retry` and unknown fields change nothing a proxy needs.
            _ => {}
        }
    }
}

/// The position of the first `\n` or `\r`. Event lines are long JSON texts, so the search
/// tests 32 bytes at a time without branching (the compiler turns that block test into vector
/// compares) and looks at single bytes only in the block that has a hit.
fn find_line_end(haystack: &[u8]) -> Option<usize> {
    const BLOCK: usize = 32;
    let is_line_end = |byte: &u8| *byte == b'\n' || *byte == b'\r';
    let mut blocks = haystack.chunks_exact(BLOCK);
    let mut offset = 0;
    for block in &mut blocks {
        let hits = block.iter().fold(0u8, |hits, &byte| {
            hits | u8::from(byte == b'\n') | u8::from(byte == b'\r')
        });
        if hits != 0 {
            return block
                .iter()
                .position(is_line_end)
                .map(|position| offset + position);
        }
        offset += BLOCK;
    }
    let rest = blocks.remainder();
    rest.iter()
        .position(is_line_end)
        .map(|position| offset + position)
}

/// Follows where a relayed stream's events end without keeping its bytes: how many events
/// passed, and whether the bytes so far stop between two events. A relay that must end a stream
/// early (a shutdown) writes its own error event only where a client will read it as a new
/// event, and numbers it after the ones relayed. Same line-ending rules as [`SseParser`].
#[derive(Debug, Default, Clone)]
pub struct SseBoundary {
    events: u64,
    /// A field or comment line was read since the last event ended.
    event_open: bool,
    /// The line being read has no byte yet.
    line_empty: bool,
    /// The last byte was a `\r`: a `\n` next is the rest of that line ending.
    after_cr: bool,
}

impl SseBoundary {
    /// An empty scanner.
    pub fn new() -> Self {
        SseBoundary {
            line_empty: true,
            ..SseBoundary::default()
        }
    }

    /// Feeds a chunk of the stream.
    pub fn push(&mut self, chunk: &[u8]) {
        for &byte in chunk {
            let after_cr = std::mem::replace(&mut self.after_cr, byte == b'\r');
            match byte {
                b'\n' if after_cr => {}
                b'\r' | b'\n' => {
                    if self.line_empty && self.event_open {
                        self.events += 1;
                        self.event_open = false;
                    }
                    self.line_empty = true;
                }
                _ => {
                    self.line_empty = false;
                    self.event_open = true;
                }
            }
        }
    }

    /// Events ended so far.
    pub fn events(&self) -> u64 {
        self.events
    }

    /// The bytes so far end between events: what comes next starts a new one.
    pub fn between_events(&self) -> bool {
        !self.event_open && self.line_empty
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small deterministic PRNG (xorshift64*) so chunkings are random but reproducible.
    pub(crate) struct Xorshift(pub u64);

    impl Xorshift {
        pub(crate) fn below(&mut self, bound: usize) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % bound.max(1)
        }
    }

    /// Cuts `input` into chunks of 1 to `max` bytes.
    pub(crate) fn random_chunks<'a>(
        input: &'a [u8],
        rng: &mut Xorshift,
        max: usize,
    ) -> Vec<&'a [u8]> {
        let mut chunks = Vec::new();
        let mut rest = input;
        while !rest.is_empty() {
            let (chunk, tail) = rest.split_at((1 + rng.below(max)).min(rest.len()));
            chunks.push(chunk);
            rest = tail;
        }
        chunks
    }

    /// The ways the tests cut a stream: whole, byte by byte, in two at every `stride`-th
    /// position and at every position next to a line ending, and randomly.
    pub(crate) fn chunkings(input: &[u8], stride: usize) -> Vec<Vec<&[u8]>> {
        let mut all = vec![vec![input], input.chunks(1).collect()];
        let near_line_end = |cut: usize| {
            let around = &input[cut.saturating_sub(2)..(cut + 2).min(input.len())];
            around.iter().any(|&byte| byte == b'\n' || byte == b'\r')
        };
        for cut in (1..input.len()).filter(|&cut| cut % stride == 0 || near_line_end(cut)) {
            let (head, tail) = input.split_at(cut);
            all.push(vec![head, tail]);
        }
        let mut rng = Xorshift(0x9E37_79B9_7F4A_7C15 ^ input.len() as u64);
        for round in 0..64 {
            all.push(random_chunks(input, &mut rng, [3, 17, 64, 300][round % 4]));
        }
        all
    }

    fn parse(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut events: Vec<SseEvent> =
            chunks.iter().flat_map(|chunk| parser.push(chunk)).collect();
        events.extend(parser.finish());
        assert_eq!(parser.buffered_len(), 0);
        events
    }

    fn fields(events: &[SseEvent]) -> Vec<(Option<&str>, Option<&str>)> {
        events
            .iter()
            .map(|e| (e.event.as_deref(), e.data.as_deref()))
            .collect()
    }

    const SAMPLE: &[u8] = b"\xEF\xBB\xBFdata: {\"a\":1}\n\n\
        : keep-alive\n\n\
        event: delta\r\ndata:no space\r\ndata:  two spaces\r\n\r\n\
        data: lone\rid: 7\rretry: 10\rcolor: blue\r\r\
        data\n\ndata: caf\xC3\xA9 \xFF\n\n\
        :comment\r\ndata: after comment\r\n\r\n\
        data: [DONE]\n\n\
        data: trailing";

    #[test]
    fn the_sample_stream_parses_per_the_spec() {
        let events = parse(&[SAMPLE]);
        assert_eq!(
            fields(&events),
            [
                (None, Some("{\"a\":1}")),
                (None, None),
                (Some("delta"), Some("no space\n two spaces")),
                (None, Some("lone")),
                (None, Some("")),
                (None, Some("café \u{FFFD}")),
                (None, Some("after comment")),
                (None, Some("[DONE]")),
                (None, Some("trailing")),
            ]
        );
        assert_eq!(
            &events[3].raw[..],
            b"data: lone\rid: 7\rretry: 10\rcolor: blue\r\r"
        );
        assert_eq!(&events[8].raw[..], b"data: trailing");
    }

    #[test]
    fn every_chunking_yields_the_same_events_and_the_raw_bytes_round_trip() {
        let whole = parse(&[SAMPLE]);
        for chunks in chunkings(SAMPLE, 1) {
            let events = parse(&chunks);
            assert_eq!(
                events,
                whole,
                "chunk sizes {:?}",
                chunks.iter().map(|c| c.len()).collect::<Vec<_>>()
            );
            let raw: Vec<u8> = events.iter().flat_map(|event| event.raw.to_vec()).collect();
            assert_eq!(raw, SAMPLE);
        }
    }

    #[test]
    fn a_crlf_split_between_chunks_is_one_line_ending() {
        let mut parser = SseParser::new();
        assert!(parser.push(b"data: a\r").is_empty());
        assert!(
            parser.push(b"\n\r").is_empty(),
            "the event waits to see whether a \\n follows"
        );
        let events = parser.push(b"\ndata: b\r\n\r\n");
        assert_eq!(fields(&events), [(None, Some("a")), (None, Some("b"))]);
        assert_eq!(&events[0].raw[..], b"data: a\r\n\r\n");
        assert!(parser.finish().is_none());
    }

    #[test]
    fn a_blank_line_ended_by_a_lone_cr_completes_with_the_next_byte() {
        let mut parser = SseParser::new();
        assert!(parser.push(b"data: a\r\r").is_empty());
        let events = parser.push(b"data: b\r\r");
        assert_eq!(fields(&events), [(None, Some("a"))]);
        assert_eq!(parser.buffered_len(), 9);
        let last = parser.finish().expect("the held event");
        assert_eq!(
            (last.data.as_deref(), &last.raw[..]),
            (Some("b"), &b"data: b\r\r"[..])
        );
    }

    #[test]
    fn finish_reports_nothing_when_nothing_is_buffered() {
        let mut parser = SseParser::new();
        assert_eq!(parser.push(b"data: x\n\n").len(), 1);
        assert!(parser.finish().is_none());
        assert_eq!(parser.push(b": only a comment").len(), 0);
        let comment = parser.finish().expect("trailing comment");
        assert_eq!(
            (comment.data, &comment.raw[..]),
            (None, &b": only a comment"[..])
        );
    }

    #[test]
    fn the_word_search_finds_the_first_line_end_anywhere() {
        for length in 0..40 {
            for target in 0..length {
                for ending in [b'\n', b'\r'] {
                    let mut haystack = vec![b'x'; length];
                    haystack[target] = ending;
                    if target + 1 < length {
                        haystack[length - 1] = b'\n';
                    }
                    assert_eq!(find_line_end(&haystack), Some(target));
                }
            }
            assert_eq!(find_line_end(&vec![0x8D; length]), None);
        }
    }

    #[test]
    fn the_boundary_tracker_counts_events_however_the_bytes_are_cut() {
        let stream = b"data: a\n\nevent: x\r\ndata: b\r\n\r\n: comment\r\rdata: c\n";
        for cut in 0..stream.len() {
            let mut boundary = SseBoundary::new();
            boundary.push(&stream[..cut]);
            boundary.push(&stream[cut..]);
            assert_eq!(boundary.events(), 3, "cut at {cut}");
            assert!(!boundary.between_events(), "an event is open at the end");
        }
        let mut boundary = SseBoundary::new();
        assert!(boundary.between_events());
        boundary.push(b"data: a\r\n\r\n");
        assert!(boundary.between_events());
        assert_eq!(boundary.events(), 1);
        boundary.push(b"\n");
        assert_eq!(boundary.events(), 1, "a blank line alone is no event");
    }
}
