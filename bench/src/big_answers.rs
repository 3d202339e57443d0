//! The soak's multi-megabyte answers: a chat completion whose text content is `size` bytes,
//! whole (JSON) or as a stream of 16 KiB deltas (SSE), with no tool call, so the guard lets it
//! through; and the checks that a client got all of that text, in order.

/// The text of the deltas a big stream is cut into.
const DELTA: usize = 16 * 1024;

/// `size` bytes of plain text that need no JSON escape; the same for the same size, so the
/// client can compare what it got with what the upstream sent.
pub fn content(size: usize) -> String {
    const WORDS: &[u8] = b"the quick brown fox jumps over the lazy dog 0123456789 ";
    WORDS
        .iter()
        .cycle()
        .take(size)
        .map(|&byte| byte as char)
        .collect()
}

/// A whole chat completion carrying `content(size)`.
pub fn json_body(size: usize) -> String {
    format!(
        r#"{{"id":"chatcmpl-big","object":"chat.completion","created":1,"model":"m","choices":[{{"index":0,"finish_reason":"stop","message":{{"role":"assistant","content":"{}"}}}}]}}"#,
        content(size)
    )
}

/// The events of a chat completion stream carrying `content(size)` in 16 KiB deltas, ended by
/// `[DONE]`.
pub fn sse_body(size: usize) -> String {
    let text = content(size);
    let event = |delta: &str, finish: &str| {
        format!(
            "data: {{\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
        )
    };
    let mut body = event(r#"{"role":"assistant","content":""}"#, "null");
    // ASCII only, so every cut is a char boundary.
    for start in (0..text.len()).step_by(DELTA) {
        let piece = &text[start..text.len().min(start + DELTA)];
        body += &event(&format!(r#"{{"content":"{piece}"}}"#), "null");
    }
    body += &event("{}", "\"stop\"");
    body += "data: [DONE]\n\n";
    body
}

/// Whether a JSON answer's body carries all of `content(size)`: `Err` says what is missing.
pub fn check_json(body: &[u8], size: usize) -> Result<(), String> {
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|error| {
        format!(
            "a body of {} bytes that does not parse: {error}",
            body.len()
        )
    })?;
    let text = value["choices"][0]["message"]["content"]
        .as_str()
        .ok_or_else(|| format!("no content in a body of {} bytes", body.len()))?;
    same_text(text, size)
}

/// Whether a stream's events carry all of `content(size)` and end with `[DONE]`.
pub fn check_sse(body: &[u8], size: usize) -> Result<(), String> {
    let body = String::from_utf8_lossy(body);
    let mut text = String::new();
    let mut done = false;
    for data in body
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .map(str::trim)
    {
        if data == "[DONE]" {
            done = true;
            continue;
        }
        let event: serde_json::Value = serde_json::from_str(data)
            .map_err(|error| format!("an event that is not JSON ({error})"))?;
        if let Some(piece) = event["choices"][0]["delta"]["content"].as_str() {
            text.push_str(piece);
        }
    }
    same_text(&text, size)?;
    match done {
        true => Ok(()),
        false => Err("no [DONE]".to_owned()),
    }
}

fn same_text(text: &str, size: usize) -> Result<(), String> {
    if text.len() != size {
        return Err(format!("{} of {size} bytes of text", text.len()));
    }
    match text == content(size) {
        true => Ok(()),
        false => Err(format!("{size} bytes of text, not the upstream's")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_upstream_sends_checks_and_a_cut_does_not() {
        let size = 100_000;
        assert_eq!(check_json(json_body(size).as_bytes(), size), Ok(()));
        assert_eq!(check_sse(sse_body(size).as_bytes(), size), Ok(()));
        let json = json_body(size);
        assert!(check_json(&json.as_bytes()[..json.len() - 10], size).is_err());
        let events = sse_body(size);
        let without_last = &events[..events.len() - "data: [DONE]\n\n".len()];
        assert!(check_sse(without_last.as_bytes(), size).is_err());
        let cut = events
            .find("\n\n")
            .map(|end| &events[end + 2..])
            .unwrap_or_default();
        assert!(check_sse(cut.replacen("data: ", "", 2).as_bytes(), size).is_err());
    }
}
