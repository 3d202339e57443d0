//! A stdio backend's child process: spawned with piped stdio, its stderr logged line by line,
//! and its stdout watched on the way to rmcp for lines that are not JSON-RPC. rmcp skips such
//! lines, so a server that prints banners or logs to stdout would otherwise look like one that
//! "did not start"; the watch lets the supervisor say what the server printed instead.

use std::pin::Pin;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use tokio::io::{AsyncBufReadExt, AsyncRead, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// Lines of a child's stderr longer than this are cut in the log.
const MAX_STDERR_LINE: usize = 2048;
/// A stdout line is inspected up to this length; a longer one is a large message, not noise.
const MAX_INSPECTED_LINE: usize = 64 * 1024;
/// How much of the first stray line is quoted.
const QUOTED: usize = 120;

/// A running child and the two ends rmcp speaks through. Dropping `child` kills it.
pub struct Spawned {
    pub child: Child,
    pub stdout: WatchedStdout,
    pub stdin: ChildStdin,
}

/// What a child printed on stdout that is not JSON-RPC.
#[derive(Debug, Default)]
pub struct StrayOutput {
    lines: usize,
    first: Option<String>,
}

impl StrayOutput {
    /// Words for the supervisor's `last_error`, when there was any.
    pub fn describe(&self) -> Option<String> {
        let first = self.first.as_deref()?;
        Some(format!(
            "it printed {} line(s) on stdout that are not JSON-RPC, the first: '{first}'",
            self.lines
        ))
    }
}

/// Starts `command` with `args`, `env` and `cwd`, logging its stderr under `server`.
pub fn spawn(
    server: &str,
    command: &str,
    args: &[String],
    env: &std::collections::BTreeMap<String, String>,
    cwd: Option<&std::path::Path>,
    stray: Arc<Mutex<StrayOutput>>,
) -> Result<Spawned, String> {
    let mut program = Command::new(command);
    program
        .args(args)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(cwd) = cwd {
        program.current_dir(cwd);
    }
    let mut child = program
        .spawn()
        .map_err(|error| format!("cannot start '{command}': {error}"))?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(format!(
            "'{command}' started without piped stdin and stdout"
        ));
    };
    if let Some(stderr) = child.stderr.take() {
        let server = server.to_owned();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(mut line)) = lines.next_line().await {
                if let Some((cut, _)) = line.char_indices().nth(MAX_STDERR_LINE) {
                    line.truncate(cut);
                }
                tracing::info!(server = %server, "{line}");
            }
        });
    }
    Ok(Spawned {
        child,
        stdout: WatchedStdout {
            inner: stdout,
            line: Vec::new(),
            overlong: false,
            stray,
        },
        stdin,
    })
}

/// A child's stdout, passed through unchanged while each complete line is inspected.
pub struct WatchedStdout {
    inner: ChildStdout,
    line: Vec<u8>,
    overlong: bool,
    stray: Arc<Mutex<StrayOutput>>,
}

impl WatchedStdout {
    fn inspect(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if byte == b'\n' {
                if !self.overlong {
                    self.finish_line();
                }
                self.line.clear();
                self.overlong = false;
            } else if self.line.len() < MAX_INSPECTED_LINE {
                self.line.push(byte);
            } else {
                self.overlong = true;
            }
        }
    }

    fn finish_line(&mut self) {
        let line = self.line.trim_ascii();
        if line.is_empty() || is_json_rpc(line) {
            return;
        }
        let mut stray = self.stray.lock().unwrap_or_else(PoisonError::into_inner);
        stray.lines += 1;
        if stray.first.is_none() {
            let text = String::from_utf8_lossy(line);
            let quoted: String = text.chars().take(QUOTED).collect();
            stray.first = Some(quoted);
        }
    }
}

/// A JSON object naming JSON-RPC 2.0: what rmcp would read as a message.
fn is_json_rpc(line: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Envelope<'a> {
        #[serde(borrow)]
        jsonrpc: Option<&'a str>,
    }
    line.first() == Some(&b'{')
        && serde_json::from_slice::<Envelope>(line)
            .is_ok_and(|message| message.jsonrpc == Some("2.0"))
}

impl AsyncRead for WatchedStdout {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let read = buf.filled()[before..].to_vec();
            this.inspect(&read);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_that_are_not_json_rpc_are_counted_and_the_first_is_quoted() {
        assert!(is_json_rpc(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#));
        for stray in [
            &b"this is not JSON-RPC"[..],
            br#"{"jsonrpc": 7}"#,
            br#"[{"jsonrpc":"2.0"}]"#,
            b"{not json",
        ] {
            assert!(!is_json_rpc(stray), "{}", String::from_utf8_lossy(stray));
        }
    }
}
