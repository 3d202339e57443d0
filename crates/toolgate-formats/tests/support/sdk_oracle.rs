//! The no-bypass property's oracle that is not toolgate: the official OpenAI and Anthropic
//! Python SDKs, run in one long-lived `python3` process (`sdk_oracle.py` beside this file),
//! read each answer with their own decoders, models and stream accumulators. It shares no code
//! with toolgate and no code with the in-process oracle (`oracle.rs`), which stays for speed
//! and for the fuzz targets.
//!
//! Missing SDKs fail the test, naming what to install, unless the run opted out with
//! `TOOLGATE_SKIP_MISSING=1`: then the property is skipped, said on stderr and counted in
//! `TOOLGATE_SKIP_LOG` (`.ci/test`'s closing line).

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::{Mutex, OnceLock};

/// What the SDKs read from one answer.
pub struct SdkReading {
    /// Every call name a client of any of the SDKs could act on.
    pub names: BTreeSet<String>,
    /// What the clients run from the final snapshot: (name, arguments as parsed), sorted.
    pub runs: Vec<(String, String)>,
}

struct Oracle {
    _child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

fn oracle() -> Option<&'static Mutex<Oracle>> {
    static ORACLE: OnceLock<Option<Mutex<Oracle>>> = OnceLock::new();
    ORACLE.get_or_init(start).as_ref()
}

fn start() -> Option<Mutex<Oracle>> {
    let imports = Command::new("python3")
        .args(["-c", "import openai, anthropic, google.genai"])
        .output()
        .is_ok_and(|output| output.status.success());
    if !imports {
        skip(
            "the OpenAI, Anthropic and Gen AI Python SDKs (`import openai, anthropic, google.genai`)",
        );
        return None;
    }
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/sdk_oracle.py");
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 starts the SDK oracle");
    let input = child.stdin.take().expect("piped stdin");
    let output = BufReader::new(child.stdout.take().expect("piped stdout"));
    Some(Mutex::new(Oracle {
        _child: child,
        input,
        output,
    }))
}

/// Fails the test naming what to install, or, opted out, says the skip and counts it.
fn skip(what: &str) {
    let opted_out = std::env::var("TOOLGATE_SKIP_MISSING").as_deref() == Ok("1");
    assert!(
        opted_out,
        "{what} is missing: pip install openai anthropic google-genai, or run .ci/test (or set TOOLGATE_SKIP_MISSING=1 to skip, counted)"
    );
    eprintln!("\n!!!!! SKIPPED: {what} is missing !!!!!\n");
    if let Some(log) = std::env::var_os("TOOLGATE_SKIP_LOG")
        && let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
    {
        let _ = writeln!(file, "{what} (the SDK oracle of no_bypass)");
    }
}

/// What the SDKs read from `body`, as a whole answer or as a stream; `None` when the SDKs are
/// missing and the run opted out.
pub fn sdk_reads(body: &[u8], stream: bool) -> Option<SdkReading> {
    let oracle = oracle()?;
    let mut oracle = oracle
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let request = serde_json::json!({"body": encode_base64(body), "stream": stream});
    writeln!(oracle.input, "{request}").expect("the SDK oracle reads");
    oracle.input.flush().expect("the SDK oracle reads");
    let mut line = String::new();
    oracle
        .output
        .read_line(&mut line)
        .expect("the SDK oracle answers");
    let answer: serde_json::Value = serde_json::from_str(&line)
        .unwrap_or_else(|error| panic!("the SDK oracle answered {line:?}: {error}"));
    let names = (answer["names"].as_array().into_iter().flatten())
        .map(text_of)
        .collect();
    let mut runs: Vec<(String, String)> = (answer["runs"].as_array().into_iter().flatten())
        .map(|run| {
            let arguments = text_of(&run[1]);
            let parsed = serde_json::from_str::<serde_json::Value>(&arguments)
                .map_or(arguments, |value| value.to_string());
            (text_of(&run[0]), parsed)
        })
        .collect();
    runs.sort();
    Some(SdkReading { names, runs })
}

/// A string the oracle sent: its UTF-8 text, or, for a Python string that is not Unicode text
/// (a lone surrogate), a spelling no tool name has, so it matches no name toolgate checked.
fn text_of(value: &serde_json::Value) -> String {
    let bytes = decode_base64(value.as_str().unwrap_or_default());
    String::from_utf8(bytes)
        .unwrap_or_else(|error| format!("<not UTF-8: {:?}>", error.into_bytes()))
}

fn decode_base64(text: &str) -> Vec<u8> {
    let sextet = |byte: u8| match byte {
        b'A'..=b'Z' => Some(byte - b'A'),
        b'a'..=b'z' => Some(byte - b'a' + 26),
        b'0'..=b'9' => Some(byte - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let values: Vec<u8> = text.bytes().filter_map(sextet).collect();
    let mut out = Vec::with_capacity(values.len() * 3 / 4);
    for chunk in values.chunks(4) {
        let mut value = 0u32;
        for (position, sextet) in chunk.iter().enumerate() {
            value |= u32::from(*sextet) << (18 - 6 * position);
        }
        for position in 0..chunk.len().saturating_sub(1) {
            out.push((value >> (16 - 8 * position)) as u8);
        }
    }
    out
}

/// Standard base64 with padding: the few lines that spare a dependency.
fn encode_base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let value = (u32::from(chunk[0]) << 16)
            | (u32::from(*chunk.get(1).unwrap_or(&0)) << 8)
            | u32::from(*chunk.get(2).unwrap_or(&0));
        for position in 0..4 {
            if position <= chunk.len() {
                out.push(char::from(
                    ALPHABET[(value >> (18 - 6 * position)) as usize & 63],
                ));
            } else {
                out.push('=');
            }
        }
    }
    out
}
