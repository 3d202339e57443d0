//! The declared-tools cache: agents send the same `tools` array on every turn, so the tools it
//! declares are read once and handed out again while the bytes stay the same. An entry is a pure
//! function of the bytes it was read from, found by a hash and confirmed by comparing every
//! byte, so no other request, no reload and no hash collision can make a hit wrong.

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use bytes::Bytes;
use bytestring::ByteString;

use crate::format::{ParseError, WireFormat};
use crate::tool::DeclaredTool;

/// Sets of the table; a power of two, so a set is picked by the hash's top bits.
const SETS: usize = 128;
/// Entries per set. Two, so two agents whose arrays land in one set both keep hitting.
const WAYS: usize = 2;
/// The most memory one entry may hold: its copy of the arrays' text, the names read from it and
/// the list of tools. Larger arrays are read on every request, as without a cache, so the whole
/// cache holds at most `SETS * WAYS * MAX_ENTRY_BYTES` (32 MiB).
const MAX_ENTRY_BYTES: usize = 128 * 1024;

/// How many bytes at the start of a `tools` array find its entry from a body, before the array
/// is read. Shorter arrays are cheap to read and are not found this way.
const PREFIX: usize = 256;

/// The fields of a request body that declare its tools, as the JSON text the body holds them in.
/// An absent field and a `null` one are both `""`: both declare nothing, and no JSON value is
/// empty text, so the key still tells every other value apart.
#[derive(Clone, Copy)]
pub(crate) struct ToolFields<'a> {
    /// The reading differs by format (Responses renames built-ins, Anthropic adds the parts of
    /// its code tool), so the format is part of what an entry is the reading of.
    pub format: WireFormat,
    pub tools: &'a str,
    /// Chat's legacy `functions` array.
    pub functions: &'a str,
}

impl<'a> ToolFields<'a> {
    /// The fields as their JSON text, when present.
    pub(crate) fn new(
        format: WireFormat,
        tools: Option<&'a str>,
        functions: Option<&'a str>,
    ) -> Self {
        let text =
            |field: Option<&'a str>| field.filter(|text| *text != "null").unwrap_or_default();
        ToolFields {
            format,
            tools: text(tools),
            functions: text(functions),
        }
    }

    /// The entries of a field's text: none when the field is absent.
    pub(crate) fn entries<'t, Entry: serde::Deserialize<'t>>(
        text: &'t str,
    ) -> Result<Vec<Entry>, ParseError> {
        if text.is_empty() {
            return Ok(Vec::new());
        }
        Ok(serde_json::from_str(text)?)
    }
}

/// How a format reads its declared tools from the text of `fields`, their schemas sharing
/// `source`, the buffer that text lies in. It must depend on nothing but `fields`: the cache
/// hands its result to every request with the same fields.
pub(crate) type ReadTools =
    fn(source: &Bytes, fields: &ToolFields<'_>) -> Result<Vec<DeclaredTool>, ParseError>;

/// A reading of one pair of arrays, with its own copy of their text, which the schemas share.
struct Entry {
    hash: u64,
    format: WireFormat,
    /// `text` is the `tools` text followed by the `functions` text; this is where one ends.
    tools_len: usize,
    text: ByteString,
    declared: Arc<[DeclaredTool]>,
}

impl Entry {
    /// Whether this entry is the reading of exactly these fields: every byte is compared, the
    /// hash only finds the candidate.
    fn is_reading_of(&self, fields: &ToolFields<'_>) -> bool {
        let tools = self.text.get(..self.tools_len);
        // The entry's own text (a reader found it in the body) needs no second comparison.
        let own_text = tools.is_some_and(|tools| std::ptr::eq(tools, fields.tools));
        self.format == fields.format
            && self.text.len() == fields.tools.len() + fields.functions.len()
            && (own_text || tools == Some(fields.tools))
            && self.text.get(self.tools_len..) == Some(fields.functions)
    }
}

/// An entry found where a body's `tools` array starts: the array is its length.
pub(crate) struct KnownTools(Arc<Entry>);

impl KnownTools {
    /// The length of the `tools` text.
    pub(crate) fn len(&self) -> usize {
        self.0.tools_len
    }

    /// The `tools` text, the entry's copy of the bytes it was found at.
    pub(crate) fn text(&self) -> &str {
        self.0.text.get(..self.0.tools_len).unwrap_or_default()
    }
}

/// One set of the table: its entries, the most recently used first.
type Set = Mutex<[Option<Arc<Entry>>; WAYS]>;

/// Declared tools already read, keyed by the bytes of the arrays that declare them.
///
/// Owned by whoever reads requests (the gateway keeps one for its whole life, across config
/// reloads: an entry depends on nothing a configuration says) and passed to
/// [`WireFormat::parse_request_cached`](crate::WireFormat::parse_request_cached), so no state
/// is hidden in the crate and tests get caches of their own.
///
/// Bounded and cheap whatever clients send: a fixed table of `SETS` sets of `WAYS` entries,
/// each entry at most `MAX_ENTRY_BYTES`; a lookup hashes the arrays once (seeded per cache, so
/// clients do not know which set an array lands in), locks one set for a few pointer copies and
/// compares the bytes of at most one candidate. A miss replaces the least recently used entry of its
/// set; a client sending a new array on every request only evicts, which costs the others a
/// read they would have made without the cache, never more. A reader finds the entry of a body's
/// `tools` where the array starts, before reading it (`tools_at`): one hash of 256 bytes and one
/// comparison, bounded by the array.
pub struct DeclaredToolsCache {
    sets: Box<[Set]>,
    /// The entries again, by the first `PREFIX` bytes of their `tools` text (`tools_at`).
    /// Weak: an entry evicted from `sets` is gone from here too.
    by_start: Box<[Mutex<Weak<Entry>>]>,
    hasher: foldhash::fast::RandomState,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl Default for DeclaredToolsCache {
    fn default() -> Self {
        DeclaredToolsCache::new()
    }
}

impl std::fmt::Debug for DeclaredToolsCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeclaredToolsCache")
            .field("hits", &self.hits())
            .field("misses", &self.misses())
            .finish_non_exhaustive()
    }
}

impl DeclaredToolsCache {
    /// An empty cache.
    pub fn new() -> Self {
        DeclaredToolsCache {
            sets: (0..SETS).map(|_| Mutex::new([None, None])).collect(),
            by_start: (0..SETS * WAYS).map(|_| Mutex::new(Weak::new())).collect(),
            hasher: foldhash::fast::RandomState::default(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Requests whose declared tools came from the cache.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Requests that declared tools and read them (a first sight, an evicted entry, or arrays
    /// too large to keep).
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// The entry whose `tools` text starts `rest`, a body from where its top-level `tools` value
    /// starts: found by the first `PREFIX` bytes, confirmed by comparing the whole text. The
    /// reader need not read that text: the entry was read from the same bytes, so they are one
    /// whole JSON value. A hit this way leaves the entry's place in its set as it was: moving
    /// it needs the hash of the whole array, the work this saves.
    pub(crate) fn tools_at(&self, format: WireFormat, rest: &[u8]) -> Option<KnownTools> {
        let start = rest.get(..PREFIX)?;
        let entry = lock(self.start_slot(format, start)).upgrade()?;
        let tools = &entry.text.as_bytes()[..entry.tools_len];
        (entry.format == format && rest.starts_with(tools)).then_some(KnownTools(entry))
    }

    fn start_slot(&self, format: WireFormat, start: &[u8]) -> &Mutex<Weak<Entry>> {
        let hash = self.hasher.hash_one((format, start));
        &self.by_start[(hash >> (u64::BITS - (SETS * WAYS).trailing_zeros())) as usize]
    }

    /// The declared tools of `fields` (which lie in `body`), from the cache when it has them
    /// (`known`, if it is their entry, saves finding it), else read by `read` and kept.
    pub(crate) fn declared_tools(
        &self,
        body: &Bytes,
        fields: &ToolFields<'_>,
        read: ReadTools,
        known: Option<&KnownTools>,
    ) -> Result<Arc<[DeclaredTool]>, ParseError> {
        if let Some(KnownTools(entry)) = known
            && entry.is_reading_of(fields)
        {
            self.hits.fetch_add(1, Ordering::Relaxed);
            return Ok(entry.declared.clone());
        }
        let text_len = fields.tools.len() + fields.functions.len();
        // Nothing declared is read at no cost; what is too large is not kept.
        if text_len == 0 {
            return read(body, fields).map(Arc::from);
        }
        if text_len > MAX_ENTRY_BYTES {
            self.misses.fetch_add(1, Ordering::Relaxed);
            return read(body, fields).map(Arc::from);
        }
        let hash = self
            .hasher
            .hash_one((fields.format, fields.tools, fields.functions));
        let set = &self.sets[(hash >> (u64::BITS - SETS.trailing_zeros())) as usize];
        if let Some(entry) = find(set, hash, fields) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            // Found by its hash, so not where its `tools` start (the reader was not given
            // it): the start table lost it, to an entry whose start shares its slot or to
            // readers that missed together (below). Pointing the slot at it again is one more
            // hash of `PREFIX` bytes, which every later request saves a whole scan of the array.
            self.point_start_table_at(&entry);
            return Ok(entry.declared.clone());
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        // Read from the cache's own copy of the arrays, so the entry's schemas share the copy and
        // not this request's body (which may hold megabytes of conversation).
        let mut joined = String::with_capacity(text_len);
        joined.push_str(fields.tools);
        joined.push_str(fields.functions);
        let text = ByteString::from(joined);
        let tools_len = fields.tools.len();
        let in_copy = ToolFields {
            format: fields.format,
            tools: &text[..tools_len],
            functions: &text[tools_len..],
        };
        let declared: Arc<[DeclaredTool]> = read(text.as_bytes(), &in_copy)?.into();
        let entry = Entry {
            hash,
            format: fields.format,
            tools_len,
            declared: declared.clone(),
            text,
        };
        if footprint(&entry) <= MAX_ENTRY_BYTES {
            let kept = insert(set, Arc::new(entry));
            self.point_start_table_at(&kept);
        }
        Ok(declared)
    }

    /// Points the start table at `entry`, kept in its set, so `tools_at` finds it. Only an
    /// entry the table holds: the slot's reference is weak, and one to an entry that was not
    /// kept would be gone with this request.
    fn point_start_table_at(&self, entry: &Arc<Entry>) {
        let tools = &entry.text.as_bytes()[..entry.tools_len];
        if let Some(start) = tools.get(..PREFIX) {
            let mut slot = lock(self.start_slot(entry.format, start));
            if !std::ptr::eq(slot.as_ptr(), Arc::as_ptr(entry)) {
                *slot = Arc::downgrade(entry);
            }
        }
    }
}

/// The entry of `set` that is the reading of `fields`, made the most recently used.
fn find(set: &Set, hash: u64, fields: &ToolFields<'_>) -> Option<Arc<Entry>> {
    let mut ways = lock(set);
    let way = ways
        .iter()
        .position(|entry| entry.as_ref().is_some_and(|entry| entry.hash == hash))?;
    ways[..=way].rotate_right(1);
    let candidate = ways[0].clone();
    drop(ways);
    // Compared outside the lock: the `Arc` keeps the entry alive, and a long comparison holds
    // no other request up.
    candidate.filter(|entry| entry.is_reading_of(fields))
}

/// Makes `entry` the most recently used of `set`, evicting the least recently used, and
/// returns the entry the set keeps for its arrays.
fn insert(set: &Set, entry: Arc<Entry>) -> Arc<Entry> {
    let mut ways = lock(set);
    // Two requests that missed together read the same arrays: one entry is enough, the one
    // kept first.
    if let Some(kept) = ways.iter().flatten().find(|kept| kept.hash == entry.hash) {
        return kept.clone();
    }
    ways.rotate_right(1);
    let evicted = ways[0].replace(entry.clone());
    drop(ways);
    // Freed outside the lock.
    drop(evicted);
    entry
}

/// Locks `mutex`. A panic cannot leave what it guards half-written (every write is one whole
/// value), so a poisoned lock still guards a consistent value.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The memory an entry holds, to keep it under [`MAX_ENTRY_BYTES`].
fn footprint(entry: &Entry) -> usize {
    let names: usize = entry.declared.iter().map(|tool| tool.name.capacity()).sum();
    std::mem::size_of::<Entry>()
        + entry.text.len()
        + names
        + entry.declared.len() * std::mem::size_of::<DeclaredTool>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::ToolKind;

    /// A reader that declares one function per `tools` byte, named by the text, so a test sees
    /// which text a result was read from.
    fn read_names(
        source: &Bytes,
        fields: &ToolFields<'_>,
    ) -> Result<Vec<DeclaredTool>, ParseError> {
        if fields.tools.starts_with('!') {
            return Err(ParseError::new("refused"));
        }
        let schema = ByteString::try_from(source.slice_ref(fields.tools.as_bytes()))
            .map_err(|_| ParseError::new("not text"))?;
        Ok(vec![DeclaredTool {
            name: format!("{}|{}", fields.tools, fields.functions),
            kind: ToolKind::Function,
            parameters: Some(schema),
        }])
    }

    fn fields(tools: &str) -> ToolFields<'_> {
        ToolFields {
            format: WireFormat::ChatCompletions,
            tools,
            functions: "",
        }
    }

    fn read(cache: &DeclaredToolsCache, fields: &ToolFields<'_>) -> Vec<String> {
        let body = Bytes::copy_from_slice(fields.tools.as_bytes());
        let fields = ToolFields {
            tools: std::str::from_utf8(&body).expect("text"),
            ..*fields
        };
        cache
            .declared_tools(&body, &fields, read_names, None)
            .expect("reads")
            .iter()
            .map(|tool| tool.name.clone())
            .collect()
    }

    /// [`read_names`] once both of two readers are reading.
    fn read_names_together(
        source: &Bytes,
        fields: &ToolFields<'_>,
    ) -> Result<Vec<DeclaredTool>, ParseError> {
        static BOTH_READING: std::sync::Barrier = std::sync::Barrier::new(2);
        BOTH_READING.wait();
        read_names(source, fields)
    }

    #[test]
    fn readers_that_missed_together_leave_the_kept_entry_found_where_its_tools_start() {
        let tools = format!("[{}]", vec![r#""a long tool entry""#; 20].join(","));
        let cache = DeclaredToolsCache::new();
        std::thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    let body = Bytes::copy_from_slice(tools.as_bytes());
                    let fields = fields(std::str::from_utf8(&body).expect("text"));
                    let read = cache.declared_tools(&body, &fields, read_names_together, None);
                    assert!(read.is_ok());
                });
            }
        });
        assert_eq!(cache.misses(), 2, "both read");
        let known = cache.tools_at(WireFormat::ChatCompletions, tools.as_bytes());
        assert_eq!(known.map(|known| known.len()), Some(tools.len()));
    }

    #[test]
    fn an_entry_found_by_its_hash_is_found_where_its_tools_start_again() {
        let tools = format!("[{}]", vec![r#""a long tool entry""#; 20].join(","));
        let cache = DeclaredToolsCache::new();
        read(&cache, &fields(&tools));
        let find = || cache.tools_at(WireFormat::ChatCompletions, tools.as_bytes());
        assert!(find().is_some());
        // As when another array's start took the slot.
        for slot in &cache.by_start {
            *lock(slot) = Weak::new();
        }
        assert!(find().is_none());
        read(&cache, &fields(&tools));
        assert_eq!(cache.hits(), 1);
        assert!(find().is_some());
    }

    #[test]
    fn a_hit_shares_the_cache_copy_and_not_the_first_body() {
        let cache = DeclaredToolsCache::new();
        let first = Bytes::from_static(b"[1,2]");
        let tools = std::str::from_utf8(&first).expect("text");
        let read_first = cache
            .declared_tools(&first, &fields(tools), read_names, None)
            .expect("reads");
        let second = Bytes::from_static(b"[1,2]");
        let read_second = cache
            .declared_tools(
                &second,
                &fields(std::str::from_utf8(&second).expect("text")),
                read_names,
                None,
            )
            .expect("reads");
        assert_eq!((cache.hits(), cache.misses()), (1, 1));
        let first_schema = read_first[0].parameters.as_ref().expect("schema");
        let second_schema = read_second[0].parameters.as_ref().expect("schema");
        assert_eq!(first_schema.as_ptr(), second_schema.as_ptr(), "one copy");
        for body in [&first, &second] {
            assert!(!body.as_ptr_range().contains(&second_schema.as_ptr()));
        }
    }

    #[test]
    fn the_format_and_the_split_between_fields_are_part_of_the_key() {
        let cache = DeclaredToolsCache::new();
        assert_eq!(read(&cache, &fields("[1]")), ["[1]|"]);
        let other_format = ToolFields {
            format: WireFormat::Responses,
            ..fields("[1]")
        };
        assert_eq!(read(&cache, &other_format), ["[1]|"]);
        assert_eq!(cache.misses(), 2, "another format is another reading");
        let moved = ToolFields {
            format: WireFormat::ChatCompletions,
            tools: "[1",
            functions: "]",
        };
        let body = Bytes::from_static(b"[1]");
        let names = cache
            .declared_tools(&body, &moved, read_names, None)
            .expect("reads");
        assert_eq!(names[0].name, "[1|]");
        assert_eq!(cache.hits(), 0);
    }

    #[test]
    fn a_failed_read_is_not_kept() {
        let cache = DeclaredToolsCache::new();
        let body = Bytes::from_static(b"!x");
        for _ in 0..2 {
            assert!(
                cache
                    .declared_tools(&body, &fields("!x"), read_names, None)
                    .is_err()
            );
        }
        assert_eq!((cache.hits(), cache.misses()), (0, 2));
    }

    #[test]
    fn arrays_too_large_are_read_every_time_and_not_kept() {
        let cache = DeclaredToolsCache::new();
        let large = "x".repeat(MAX_ENTRY_BYTES + 1);
        for _ in 0..2 {
            assert_eq!(read(&cache, &fields(&large))[0].len(), large.len() + 1);
        }
        assert_eq!((cache.hits(), cache.misses()), (0, 2));
        let empty = Bytes::new();
        cache
            .declared_tools(&empty, &fields(""), read_names, None)
            .expect("reads");
        assert_eq!((cache.hits(), cache.misses()), (0, 2), "nothing declared");
    }

    #[test]
    fn the_table_holds_a_bounded_number_of_entries_and_keeps_the_recently_used() {
        let cache = DeclaredToolsCache::new();
        let arrays: Vec<String> = (0..SETS * WAYS * 4).map(|n| format!("[{n}]")).collect();
        for array in &arrays {
            read(&cache, &fields(array));
        }
        let kept: usize = cache
            .sets
            .iter()
            .map(|set| set.lock().expect("set").iter().flatten().count())
            .sum();
        assert!(kept <= SETS * WAYS, "{kept} entries");
        // The last array read is the most recent of its set: still there.
        let last = arrays.last().expect("arrays");
        let hits = cache.hits();
        read(&cache, &fields(last));
        assert_eq!(cache.hits(), hits + 1);
    }

    #[test]
    fn an_entry_used_again_outlives_a_newer_one_in_its_set() {
        let cache = DeclaredToolsCache::new();
        // Three arrays of one set: find them by the set the cache's own hash picks.
        let set_of = |tools: &str| {
            let hash = cache
                .hasher
                .hash_one((WireFormat::ChatCompletions, tools, ""));
            (hash >> (u64::BITS - SETS.trailing_zeros())) as usize
        };
        let same_set: Vec<String> = (0..)
            .map(|n| format!("[{n}]"))
            .filter(|tools| set_of(tools) == set_of("[0]"))
            .take(3)
            .collect();
        let [a, b, c] = [&same_set[0], &same_set[1], &same_set[2]];
        read(&cache, &fields(a));
        read(&cache, &fields(b));
        read(&cache, &fields(a)); // a is now the most recent
        read(&cache, &fields(c)); // evicts b
        let misses = cache.misses();
        read(&cache, &fields(a));
        assert_eq!(cache.misses(), misses, "a was kept");
        read(&cache, &fields(b));
        assert_eq!(cache.misses(), misses + 1, "b was evicted");
    }

    // -----------------------------------------------------------------------------------------
    // The differential property: over generated requests, in every format, the cached reading
    // (a miss, then hits from this body and from another body with the same arrays), the
    // uncached reading and the exact one-pass reading give the same request or the same error.

    use proptest::prelude::*;

    use crate::format::ToolRequest;
    use crate::request_reader::read_exact;

    /// What a reading of a request gives the checks, comparable: the declared tools (name,
    /// kind, schema text) and the other fields, or the error.
    type Reading = Result<
        (
            Vec<(String, ToolKind, Option<String>)>,
            bool,
            bool,
            Option<String>,
            Option<String>,
        ),
        ParseError,
    >;

    fn reading(result: Result<ToolRequest, ParseError>) -> Reading {
        result.map(|request| {
            let tools = (request.declared_tools.iter())
                .map(|tool| {
                    let schema = tool.schema_text().map(str::to_owned);
                    (tool.name.clone(), tool.kind, schema)
                })
                .collect();
            let directives = request
                .directives
                .as_deref()
                .map(|raw| raw.get().to_owned());
            (
                tools,
                request.stream,
                request.background,
                request.model,
                directives,
            )
        })
    }

    fn exact(format: WireFormat, body: Bytes) -> Reading {
        reading(match format {
            WireFormat::ChatCompletions => read_exact::<crate::chat::Chat>(body),
            WireFormat::Responses => read_exact::<crate::responses::Responses>(body),
            WireFormat::AnthropicMessages => read_exact::<crate::anthropic::Anthropic>(body),
            // Gemini's tools are read apart from the cache: its one reading is the exact one.
            WireFormat::Gemini => WireFormat::Gemini.parse_request(body),
        })
    }

    fn uncached(format: WireFormat, body: &[u8]) -> Reading {
        reading(format.parse_request(Bytes::copy_from_slice(body)))
    }

    fn cached(format: WireFormat, body: &[u8], cache: &DeclaredToolsCache) -> Reading {
        reading(format.parse_request_cached(Bytes::copy_from_slice(body), cache))
    }

    /// A JSON string of a tool name: plain, escaped, or not a string at all.
    fn name() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            r#""get_weather""#,
            r#""send_email""#,
            r#""web_search""#,
            r#""code_execution""#,
            r#""bash_code_execution""#,
            r#""caf\u00e9""#,
            r#""\u0067et_weather""#,
            r#""""#,
            "5",
            "null",
        ])
        .prop_map(str::to_owned)
    }

    fn schema() -> impl Strategy<Value = String> {
        prop::sample::select(vec![
            r#"{"type":"object"}"#,
            r#"{ "type" : "object", "properties": {"x": {"type": "integer"}} }"#,
            "{}",
            "true",
            "null",
            r#""text""#,
            r#"{"type":"object","type":"string"}"#,
        ])
        .prop_map(str::to_owned)
    }

    /// A `tools` entry in one of the formats' shapes, or a broken one.
    fn tool_entry() -> impl Strategy<Value = String> {
        (0..14u8, name(), name(), schema(), any::<bool>()).prop_map(
            |(shape, name, other, schema, extra)| {
                let extra = if extra { r#","description":"d","strict":true"# } else { "" };
                match shape {
                    0 => format!(
                        r#"{{"type":"function","function":{{"name":{name},"parameters":{schema}{extra}}}}}"#
                    ),
                    1 => format!(r#"{{"type":"function","name":{name},"parameters":{schema}{extra}}}"#),
                    2 => format!(r#"{{"name":{name},"input_schema":{schema}{extra}}}"#),
                    3 => format!(r#"{{"type":"custom","custom":{{"name":{name}}}{extra}}}"#),
                    4 => format!(r#"{{"type":"custom","name":{name},"input_schema":{schema}}}"#),
                    5 => format!(r#"{{"type":"custom","name":{name}{extra}}}"#),
                    6 => r#"{"type":"web_search_preview_2025_03_11"}"#.to_owned(),
                    7 => r#"{"type":"code_execution_20250825","name":"code_execution"}"#.to_owned(),
                    8 => r#"{"type":"function"}"#.to_owned(),
                    9 => format!(r#"{{"name":{name},"name":{other},"input_schema":{schema}}}"#),
                    10 => format!(
                        r#"{{"type":"function","function":{{"name":{name},"name":{other}}}}}"#
                    ),
                    11 => format!(r#"{{"function":{{"name":{name}}},"parameters":{schema}}}"#),
                    12 => format!(r#"{{"type":{name},"name":{other}}}"#),
                    _ => schema,
                }
            },
        )
    }

    /// The text of a `tools` or `functions` field: an array of entries, empty, null, or not an
    /// array.
    fn array(entry: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
        (0..8u8, prop::collection::vec(entry, 0..8), any::<bool>()).prop_map(
            |(kind, entries, spaced)| match kind {
                0 => "null".to_owned(),
                1 => "[]".to_owned(),
                2 => r#"{"name":"a"}"#.to_owned(),
                _ if spaced => format!("[ {} ]", entries.join(" ,\n ")),
                _ => format!("[{}]", entries.join(",")),
            },
        )
    }

    fn function_entry() -> impl Strategy<Value = String> {
        (0..4u8, name(), schema()).prop_map(|(shape, name, schema)| match shape {
            0 => format!(r#"{{"name":{name}}}"#),
            1 => format!(r#"{{"name":{name},"parameters":{schema},"description":"d"}}"#),
            2 => format!(r#"{{"parameters":{schema}}}"#),
            _ => format!(r#"{{"name":{name},"name":"other"}}"#),
        })
    }

    /// A request body: the tool fields and the others in any order, some absent, some of the
    /// wrong type, and, at times, a byte that is not UTF-8 inside the tools or elsewhere.
    #[derive(Debug, Clone)]
    struct Request {
        tools: Option<String>,
        functions: Option<String>,
        others: Vec<String>,
        order: Vec<usize>,
        latin1: u8,
        /// `"tools": [` as Python writes it, not `"tools":[`.
        spaced_key: bool,
        /// The text of a `tools` key a message carries of its own.
        echo: Option<String>,
    }

    impl Request {
        /// The body, with `history` as its conversation.
        fn body(&self, history: &str) -> Vec<u8> {
            let mut fields: Vec<Vec<u8>> = Vec::new();
            let colon = if self.spaced_key { ": " } else { ":" };
            if let Some(tools) = &self.tools {
                fields.push(format!(r#""tools"{colon}{tools}"#).into_bytes());
            }
            if let Some(functions) = &self.functions {
                fields.push(format!(r#""functions"{colon}{functions}"#).into_bytes());
            }
            fields.extend(self.others.iter().map(|field| field.clone().into_bytes()));
            let echo = (self.echo.as_ref())
                .map(|tools| format!(r#","tools"{colon}{tools}"#))
                .unwrap_or_default();
            fields.push(
                format!(
                    r#""messages":[{{"role":"user","content":"{history}"{echo}}}],"input":"hi""#
                )
                .into_bytes(),
            );
            let mut ordered: Vec<Vec<u8>> = Vec::new();
            for &at in &self.order {
                if at < fields.len() {
                    ordered.push(fields[at].clone());
                }
            }
            ordered.extend(
                (0..fields.len())
                    .filter(|at| !self.order.contains(at))
                    .map(|at| fields[at].clone()),
            );
            let mut body = b"{".to_vec();
            body.extend(ordered.join(&b","[..]));
            body.push(b'}');
            // A Latin-1 byte in a string the readers skip: a tool's description, or the
            // conversation.
            let target: &[u8] = match self.latin1 {
                1 => br#""description":"d"#,
                2 => br#""content":""#,
                _ => return body,
            };
            if let Some(at) = body.windows(target.len()).position(|w| w == target) {
                body.insert(at + target.len(), 0xE9);
            }
            body
        }
    }

    fn request() -> impl Strategy<Value = Request> {
        let other = prop::sample::select(vec![
            r#""stream":true"#,
            r#""stream":"yes""#,
            r#""model":"m""#,
            r#""model":5"#,
            r#""background":true"#,
            r#""toolgate":{"group":"g"}"#,
            r#""toolgate":null"#,
            r#""system":"be brief""#,
            r#""tools":[]"#,
        ]);
        (
            prop::option::weighted(0.9, array(tool_entry())),
            prop::option::weighted(0.3, array(function_entry())),
            prop::collection::vec(other.prop_map(str::to_owned), 0..4),
            prop::collection::vec(0..8usize, 0..8),
            0..6u8,
            any::<bool>(),
            prop::bool::weighted(0.2),
        )
            .prop_map(
                |(tools, functions, others, order, latin1, spaced_key, echo)| Request {
                    echo: tools.clone().filter(|_| echo),
                    tools,
                    functions,
                    others,
                    order,
                    latin1,
                    spaced_key,
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn the_cached_reading_is_the_uncached_and_the_one_pass_reading(
            request in request(),
            other_tools in array(tool_entry()),
        ) {
            let body = request.body("hi");
            let longer = request.body("a conversation that has moved on");
            for format in WireFormat::ALL.into_iter().filter(|format| format.caches_declared_tools()) {
                let reference = exact(format, Bytes::copy_from_slice(&body));
                prop_assert_eq!(&uncached(format, &body), &reference, "{:?}", format);
                let cache = DeclaredToolsCache::new();
                prop_assert_eq!(&cached(format, &body, &cache), &reference, "{:?} miss", format);
                prop_assert_eq!(&cached(format, &body, &cache), &reference, "{:?} hit", format);
                let moved_on = exact(format, Bytes::copy_from_slice(&longer));
                prop_assert_eq!(&uncached(format, &longer), &moved_on, "{:?}", format);
                prop_assert_eq!(
                    &cached(format, &longer, &cache), &moved_on, "{:?} other body", format
                );
                // Other tools at the top level, the cached ones in a message: no hit.
                let swapped = Request {
                    tools: Some(other_tools.clone()),
                    echo: request.tools.clone(),
                    ..request.clone()
                }
                .body("hi");
                let swapped_reference = exact(format, Bytes::copy_from_slice(&swapped));
                prop_assert_eq!(
                    &cached(format, &swapped, &cache), &swapped_reference, "{:?} swapped", format
                );
                let declares = reference.as_ref().is_ok_and(|read| !read.0.is_empty());
                if declares && request.latin1 == 0 && Some(&other_tools) != request.tools.as_ref() {
                    prop_assert_eq!(cache.hits(), 2, "{:?}: the hits were taken", format);
                }
                // The cached array again as the body's last value, under another key: read as
                // the body says.
                if let Some(tools) = &request.tools {
                    let mut trailing = swapped.clone();
                    trailing.pop();
                    trailing.extend(format!(r#","meta":{tools}}}"#).into_bytes());
                    let trailing_reference = exact(format, Bytes::copy_from_slice(&trailing));
                    prop_assert_eq!(
                        &cached(format, &trailing, &cache), &trailing_reference,
                        "{:?} trailing", format
                    );
                }
            }
        }

        #[test]
        fn a_changed_byte_in_the_tool_fields_is_never_a_hit(
            request in request(),
            in_functions in any::<bool>(),
            at in any::<prop::sample::Index>(),
            byte in any::<u8>(),
        ) {
            // The changed byte must be in the top-level field, not in a message's copy of it.
            let request = Request { echo: None, ..request };
            let body = request.body("hi");
            let colon = if request.spaced_key { ": " } else { ":" };
            let (key, field) = if in_functions {
                (format!("\"functions\"{colon}"), &request.functions)
            } else {
                (format!("\"tools\"{colon}"), &request.tools)
            };
            let Some(field) = field.as_ref() else { return Ok(()) };
            let written = format!("{key}{field}");
            let Some(start) = body.windows(written.len()).position(|w| w == written.as_bytes())
            else {
                return Ok(());
            };
            let mut changed = body.clone();
            let at = start + key.len() + at.index(field.len());
            prop_assume!(changed[at] != byte);
            changed[at] = byte;
            for format in WireFormat::ALL.into_iter().filter(|format| format.caches_declared_tools()) {
                let cache = DeclaredToolsCache::new();
                let _ = cached(format, &body, &cache);
                let hits = cache.hits();
                prop_assert_eq!(
                    cached(format, &changed, &cache),
                    exact(format, Bytes::from(changed.clone())),
                    "{:?}", format
                );
                // Only chat reads `functions`: another format rightly hits when only it changed.
                if !in_functions || format == WireFormat::ChatCompletions {
                    prop_assert_eq!(cache.hits(), hits, "{:?}: a changed array hit", format);
                }
            }
        }
    }

    #[test]
    fn every_format_hands_out_schemas_of_the_cache_copy_not_of_a_body() {
        let body = |history: &str| {
            Bytes::from(format!(
                r#"{{"messages":[{{"role":"user","content":"{history}"}}],"tools":[{{"name":"f","input_schema":{{"type":"object"}}}}]}}"#
            ))
        };
        for format in WireFormat::ALL
            .into_iter()
            .filter(|format| format.caches_declared_tools())
        {
            let cache = DeclaredToolsCache::new();
            let (first, second) = (body("hi"), body("hi again"));
            let schema = |body: &Bytes| {
                let read = format.parse_request_cached(body.clone(), &cache);
                let tools = read.expect("reads").declared_tools;
                tools[0].parameters.clone().expect("a schema")
            };
            let (from_first, from_second) = (schema(&first), schema(&second));
            assert_eq!(&*from_second, r#"{"type":"object"}"#);
            assert_eq!(
                from_first.as_ptr(),
                from_second.as_ptr(),
                "{format:?}: one copy"
            );
            for body in [&first, &second] {
                assert!(!body.as_ptr_range().contains(&from_second.as_ptr()));
            }
            assert_eq!((cache.hits(), cache.misses()), (1, 1), "{format:?}");
        }
    }

    #[test]
    fn a_hit_is_the_top_level_tools_and_no_copy_of_them_elsewhere() {
        let entries: Vec<String> = (0..8)
            .map(|n| {
                format!(
                    r#"{{"type":"function","function":{{"name":"tool_{n}","parameters":{{"type":"object"}}}}}}"#
                )
            })
            .collect();
        let tools = format!("[{}]", entries.join(","));
        let other = tools.replace("tool_0", "tool_x");
        let history = "x".repeat(100 * 1024);
        let plain = format!(
            r#"{{"model":"m","messages":[{{"content":"{history}"}}],"tools": {tools},"stream":true}}"#
        );
        // The cached array again, in a message after a top-level `tools` that differs, and as
        // the body's last value under another key.
        let nested =
            format!(r#"{{"tools":{other},"messages":[{{"role":"user","tools":{tools}}}]}}"#);
        let decoy = format!(r#"{{"tools":{other},"meta":{tools}}}"#);
        // A schema with a property named `tools`.
        let keyed = tools.replace(r#"{"type":"object"}"#, r#"{"properties":{"tools":{}}}"#);
        let keyed = format!(r#"{{"messages":[],"tools":{keyed}}}"#);
        for format in WireFormat::ALL
            .into_iter()
            .filter(|format| format.caches_declared_tools())
        {
            let cache = DeclaredToolsCache::new();
            let first = cached(format, plain.as_bytes(), &cache);
            assert_eq!(
                first,
                exact(format, Bytes::from(plain.clone())),
                "{format:?}"
            );
            assert_eq!(cached(format, plain.as_bytes(), &cache), first);
            assert_eq!(cache.hits(), 1, "{format:?}: a body of any size hits");
            // The first reads `other` (a miss), the second finds it: each reads `tool_x`.
            for (body, hits) in [(&nested, 1), (&decoy, 2)] {
                let read = cached(format, body.as_bytes(), &cache);
                assert_eq!(read, exact(format, Bytes::from(body.clone())), "{format:?}");
                assert_eq!(read.expect("reads").0[0].0, "tool_x", "{format:?}");
                assert_eq!(cache.hits(), hits, "{format:?}");
            }
            let _ = cached(format, keyed.as_bytes(), &cache);
            assert_eq!(
                cached(format, keyed.as_bytes(), &cache)
                    .expect("reads")
                    .0
                    .len(),
                8
            );
            assert_eq!(cache.hits(), 3, "{format:?}");
        }
        // Chat's `functions` are part of the key: the same `tools` with other functions is no hit.
        let cache = DeclaredToolsCache::new();
        let chat = WireFormat::ChatCompletions;
        let with_functions = |name: &str| {
            format!(r#"{{"messages":[],"tools":{tools},"functions":[{{"name":"{name}"}}]}}"#)
        };
        let _ = cached(chat, with_functions("legacy_a").as_bytes(), &cache);
        let read = cached(chat, with_functions("legacy_b").as_bytes(), &cache).expect("reads");
        assert_eq!(read.0.last().map(|tool| tool.0.as_str()), Some("legacy_b"));
        assert_eq!(cache.hits(), 0);
    }

    #[test]
    fn a_renamed_tool_misses_and_reads_the_new_name() {
        let cache = DeclaredToolsCache::new();
        let body = |name: &str| {
            Bytes::from(format!(
                r#"{{"messages":[],"tools":[{{"type":"function","function":{{"name":"{name}","parameters":{{"type":"object"}}}}}}]}}"#
            ))
        };
        let names = |request: ToolRequest| -> Vec<String> {
            request
                .declared_tools
                .iter()
                .map(|tool| tool.name.clone())
                .collect()
        };
        let format = WireFormat::ChatCompletions;
        for _ in 0..2 {
            let read = format
                .parse_request_cached(body("send_email"), &cache)
                .expect("reads");
            assert_eq!(names(read), ["send_email"]);
        }
        let read = format
            .parse_request_cached(body("send_emaim"), &cache)
            .expect("reads");
        assert_eq!(names(read), ["send_emaim"]);
        assert_eq!((cache.hits(), cache.misses()), (1, 2));
    }
}
