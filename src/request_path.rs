//! The one reading of a request path: decoded, dot segments removed and slashes collapsed as
//! RFC 3986 and the servers behind toolgate read it, so that the route toolgate picks and the
//! endpoint the upstream serves are one. The request is routed on that path and forwarded with
//! it, re-encoded so that one decoding gives it back; a path that different servers would read
//! differently (an encoded `/` or `%`, a `\`, a `;` parameter, control characters, bytes that
//! are not UTF-8) is refused rather than guessed at.

use std::borrow::Cow;
use std::fmt;

/// Why a request path was refused: the client gets a 400 that says so.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathRefusal(&'static str);

impl fmt::Display for PathRefusal {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(self.0)
    }
}

/// The canonical form of a request path, ready to route on and to forward: it starts with
/// `/`, has no empty, `.` or `..` segment, and every byte outside the characters a path may
/// carry as they are is percent-encoded once (upper-case hex). A path already in that form is
/// borrowed, not copied: the usual request pays one scan.
pub fn canonical(raw: &str) -> Result<Cow<'_, str>, PathRefusal> {
    if is_canonical(raw) {
        return Ok(Cow::Borrowed(raw));
    }
    if raw.is_empty() {
        return Ok(Cow::Borrowed("/"));
    }
    if !raw.starts_with('/') {
        return Err(PathRefusal(
            "the request path does not start with '/' (only origin-form paths are routed)",
        ));
    }
    let decoded = decode(raw)?;
    let mut segments: Vec<&str> = Vec::new();
    let mut ends_in_slash = false;
    for segment in decoded.split('/').skip(1) {
        ends_in_slash = matches!(segment, "" | "." | "..");
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            segment => segments.push(segment),
        }
    }
    let mut path = String::with_capacity(raw.len());
    for segment in &segments {
        path.push('/');
        encode_into(segment, &mut path);
    }
    if ends_in_slash || segments.is_empty() {
        path.push('/');
    }
    Ok(Cow::Owned(path))
}

/// Whether a byte stands for itself in a canonical path: RFC 3986's unreserved characters,
/// its sub-delimiters but `;` (a path parameter to some servers), `:` and `@`.
fn is_plain(byte: u8) -> bool {
    byte.is_ascii_alphanumeric()
        || matches!(
            byte,
            b'-' | b'.'
                | b'_'
                | b'~'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b'='
                | b':'
                | b'@'
        )
}

/// A path that [`canonical`] would give back unchanged: plain bytes and single slashes only,
/// and no segment of dots.
fn is_canonical(path: &str) -> bool {
    let bytes = path.as_bytes();
    if bytes.first() != Some(&b'/') {
        return false;
    }
    let mut segment_start = 1;
    for (at, &byte) in bytes.iter().enumerate().skip(1) {
        if byte == b'/' {
            if is_dot_segment(&bytes[segment_start..at]) || at == segment_start {
                return false;
            }
            segment_start = at + 1;
        } else if !is_plain(byte) {
            return false;
        }
    }
    !is_dot_segment(&bytes[segment_start..])
}

fn is_dot_segment(segment: &[u8]) -> bool {
    matches!(segment, b"." | b"..")
}

/// The path with every `%XX` decoded; refused when the result would read differently to
/// different servers.
fn decode(raw: &str) -> Result<String, PathRefusal> {
    let bytes = raw.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        let (byte, encoded) = if byte == b'%' {
            let high = bytes.get(at + 1).and_then(|digit| hex_value(*digit));
            let low = bytes.get(at + 2).and_then(|digit| hex_value(*digit));
            match (high, low) {
                (Some(high), Some(low)) => {
                    at += 3;
                    (high << 4 | low, true)
                }
                _ => {
                    return Err(PathRefusal(
                        "the request path has a '%' that is not followed by two hex digits",
                    ));
                }
            }
        } else {
            at += 1;
            (byte, false)
        };
        match byte {
            b'/' if encoded => {
                return Err(PathRefusal(
                    "the request path has an encoded '/' (%2F), which servers read either as a separator or as part of a segment",
                ));
            }
            b'%' if encoded => {
                return Err(PathRefusal(
                    "the request path has an encoded '%' (%25), which a server that decodes twice reads as another path",
                ));
            }
            b'\\' => {
                return Err(PathRefusal(
                    "the request path has a '\\', which some servers read as '/'",
                ));
            }
            b';' => {
                return Err(PathRefusal(
                    "the request path has a ';', which some servers read as the start of path parameters and drop",
                ));
            }
            byte if byte < 0x20 || byte == 0x7f => {
                return Err(PathRefusal("the request path has a control character"));
            }
            byte => decoded.push(byte),
        }
    }
    String::from_utf8(decoded)
        .map_err(|_| PathRefusal("the request path does not decode to UTF-8 text"))
}

fn hex_value(digit: u8) -> Option<u8> {
    char::from(digit)
        .to_digit(16)
        .and_then(|value| u8::try_from(value).ok())
}

/// Appends a decoded segment, each byte that does not stand for itself written as `%XX`.
fn encode_into(segment: &str, path: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &byte in segment.as_bytes() {
        if is_plain(byte) {
            path.push(char::from(byte));
        } else {
            path.push('%');
            path.push(char::from(HEX[usize::from(byte >> 4)]));
            path.push(char::from(HEX[usize::from(byte & 0x0f)]));
        }
    }
}

/// Replaces a request's path by its canonical form, keeping its query; the rest of the gateway
/// (routing, formats, forwarding, the audit) reads the URI only after this.
pub fn canonicalize(uri: &mut http::Uri) -> Result<(), PathRefusal> {
    let path = match canonical(uri.path())? {
        Cow::Borrowed(_) => return Ok(()),
        Cow::Owned(path) => path,
    };
    let path_and_query = match uri.query() {
        Some(query) => format!("{path}?{query}"),
        None => path,
    };
    let mut parts = std::mem::take(uri).into_parts();
    parts.path_and_query = Some(
        http::uri::PathAndQuery::try_from(path_and_query)
            .map_err(|_| PathRefusal("the request path cannot be written back as a URI"))?,
    );
    *uri = http::Uri::from_parts(parts)
        .map_err(|_| PathRefusal("the request path cannot be written back as a URI"))?;
    Ok(())
}

/// Whether `path` starts with the route prefix `prefix` as a router compares them: ASCII
/// letters in either case, since some upstreams route so, and a route must not be walked
/// around by writing its path in capitals.
pub fn strip_prefix_ignoring_case<'a>(path: &'a str, prefix: &str) -> Option<&'a str> {
    let head = path.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| path.get(prefix.len()..))
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(path: &str) -> Result<String, PathRefusal> {
        canonical(path).map(Cow::into_owned)
    }

    #[test]
    fn a_canonical_path_is_borrowed_as_it_is() {
        for path in [
            "/",
            "/v1/chat/completions",
            "/v1/responses/resp_1/",
            "/a:b@c",
        ] {
            assert!(matches!(canonical(path), Ok(Cow::Borrowed(same)) if same == path));
        }
    }

    #[test]
    fn encodings_dots_and_slashes_are_read_as_servers_read_them() {
        let cases = [
            ("/v1/chat/%63ompletions", "/v1/chat/completions"),
            ("/v1/chat/%2e/completions", "/v1/chat/completions"),
            ("/v1/models/%2E%2E/chat/completions", "/v1/chat/completions"),
            ("//v1///chat/completions", "/v1/chat/completions"),
            ("/v1/x/../chat/./completions", "/v1/chat/completions"),
            ("/v1/chat/completions/..", "/v1/chat/"),
            ("/../../v1/messages", "/v1/messages"),
            ("/v1/files/a%20b", "/v1/files/a%20b"),
            ("/v1/files/a%c3%a9", "/v1/files/a%C3%A9"),
            ("/v1/files/a b", "/v1/files/a%20b"),
            ("", "/"),
        ];
        for (raw, expected) in cases {
            assert_eq!(read(raw).as_deref(), Ok(expected), "{raw}");
        }
    }

    #[test]
    fn what_servers_read_differently_is_refused() {
        for raw in [
            "/v1/chat%2Fcompletions",
            "/v1/chat%2fcompletions",
            "/v1/chat/%2563ompletions",
            "/v1/chat\\completions",
            "/v1/chat/%5Ccompletions",
            "/v1/chat/completions;x=1",
            "/v1/chat/completions%3B",
            "/v1/chat/%00completions",
            "/v1/chat/%",
            "/v1/chat/%6",
            "/v1/chat/%zz",
            "/v1/%ff",
            "*",
            "v1/chat/completions",
        ] {
            assert!(read(raw).is_err(), "{raw} was read as {:?}", read(raw));
        }
    }

    /// A server's reading of a path, written from RFC 3986 apart from [`canonical`]: every
    /// `%XX` decoded, repeated slashes merged (as nginx does first), then its §5.2.4 loop
    /// removing dot segments from an input buffer into an output buffer.
    fn server_reading(path: &str) -> String {
        let bytes = path.as_bytes();
        let mut decoded = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let hex = bytes
                .get(at + 1..at + 3)
                .and_then(|digits| u8::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok());
            match (bytes[at], hex) {
                (b'%', Some(byte)) => {
                    decoded.push(byte);
                    at += 3;
                }
                (byte, _) => {
                    decoded.push(byte);
                    at += 1;
                }
            }
        }
        let mut input = String::from_utf8_lossy(&decoded).into_owned();
        while input.contains("//") {
            input = input.replace("//", "/");
        }
        let mut output = String::new();
        while !input.is_empty() {
            if let Some(rest) = input.strip_prefix("../").or(input.strip_prefix("./")) {
                input = rest.to_owned();
            } else if input.starts_with("/./") || input == "/." {
                input = format!("/{}", &input[if input == "/." { 2 } else { 3 }..]);
            } else if input.starts_with("/../") || input == "/.." {
                input = format!("/{}", &input[if input == "/.." { 3 } else { 4 }..]);
                output.truncate(output.rfind('/').unwrap_or(0));
            } else if input == "." || input == ".." {
                input.clear();
            } else {
                let start = usize::from(input.starts_with('/'));
                let end = input[start..]
                    .find('/')
                    .map_or(input.len(), |at| at + start);
                output.push_str(&input[..end]);
                input = input[end..].to_owned();
            }
        }
        if output.is_empty() {
            "/".to_owned()
        } else {
            output
        }
    }

    /// One way a client may write a character of a path.
    fn written(c: char, how: u8) -> String {
        match how {
            0 => format!("%{:02X}", u32::from(c)),
            1 => format!("%{:02x}", u32::from(c)),
            2 => c.to_ascii_uppercase().to_string(),
            _ => c.to_string(),
        }
    }

    /// The endpoints paths are generated from, and what a client may put between segments.
    const ENDPOINTS: [&str; 6] = [
        "/v1/chat/completions",
        "/v1/responses",
        "/v1/messages",
        "/v1/models",
        "/v1/files/file-1/content",
        "/v1/embeddings",
    ];
    const BETWEEN: [&str; 9] = [
        "/", "//", "/./", "/%2e/", "/x/../", "/%2E%2E/", "/;a=1/", "/%2F", "\\",
    ];

    proptest::proptest! {
        /// Whatever a client writes, toolgate either refuses the path or reads it as a server
        /// that decodes and normalises does; the path it forwards reads the same to a server
        /// that only decodes; and the route it picks is the route of that reading.
        #[test]
        fn the_routers_reading_is_a_normalising_servers(
            endpoint in 0..ENDPOINTS.len(),
            spellings in proptest::collection::vec(0u8..8, 40),
            joints in proptest::collection::vec(0..BETWEEN.len() * 3, 8),
        ) {
            let mut raw = String::new();
            for (index, segment) in ENDPOINTS[endpoint].split('/').skip(1).enumerate() {
                let joint = joints[index % joints.len()];
                raw.push_str(BETWEEN.get(joint).copied().unwrap_or("/"));
                for (at, c) in segment.chars().enumerate() {
                    raw.push_str(&written(c, spellings[(index * 7 + at) % spellings.len()]));
                }
            }
            let reading = server_reading(&raw);
            match canonical(&raw) {
                Ok(path) => {
                    proptest::prop_assert_eq!(&server_reading(&path), &reading, "{}", raw);
                    proptest::prop_assert_eq!(&server_reading(&path), &path.to_string());
                    let router_match = strip_prefix_ignoring_case(&path, ENDPOINTS[endpoint]);
                    let server_match = strip_prefix_ignoring_case(&reading, ENDPOINTS[endpoint]);
                    proptest::prop_assert_eq!(router_match, server_match, "{}", raw);
                }
                Err(_) => {
                    let ambiguous = ["%2F", "%2f", "\\", ";", "%5C", "%5c", "%3B", "%3b"];
                    proptest::prop_assert!(
                        ambiguous.iter().any(|marker| raw.contains(marker)),
                        "refused without cause: {}", raw
                    );
                }
            }
        }
    }

    #[test]
    fn route_prefixes_compare_letters_in_either_case() {
        assert_eq!(
            strip_prefix_ignoring_case("/V1/Chat/Completions", "/v1/chat"),
            Some("/Completions")
        );
        assert_eq!(strip_prefix_ignoring_case("/v1", "/v1/chat"), None);
    }
}
