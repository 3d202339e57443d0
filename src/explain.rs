//! `toolgate explain`: runs a route's plugins on a recorded request and response, offline, and
//! prints what the client would have received and why — for debugging a 403 without traffic.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use toolgate_plugin::{ExchangeMeta, Parsed};

use crate::capture::CaptureRecord;
use crate::config::Config;
use crate::error::ErrorReport;
use crate::exchange::Exchange;
use crate::on_block::OnBlock;
use crate::pipeline::StageOutcome;
use crate::router::Route;

/// Where the recorded exchange comes from.
pub enum Recorded {
    /// A request body and an answer body, each in its file.
    Files { request: PathBuf, response: PathBuf },
    /// A captured exchange's record, in a file.
    CaptureFile(PathBuf),
    /// A captured exchange, fetched by its request id from a running gateway's admin listener.
    Captured { id: String, admin: Option<String> },
}

/// `toolgate explain` on a loaded config: exit 0 allowed, 1 blocked, 2 bad input.
pub async fn run(config: &Config, route_path: Option<&str>, recorded: Recorded) -> ExitCode {
    let (path, request, response) = match load(config, recorded).await {
        Ok(loaded) => loaded,
        Err(error) => {
            eprintln!("toolgate explain: {error}");
            return ExitCode::from(2);
        }
    };
    let route_path = route_path.map_or(path, str::to_owned);
    if route_path.is_empty() {
        eprintln!("toolgate explain: give --route: the recorded exchange names no path");
        return ExitCode::from(2);
    }
    let Some(route) = config.router.find(&route_path).cloned() else {
        eprintln!("toolgate explain: no route matches '{route_path}'");
        return ExitCode::from(2);
    };
    let report = explain(&route, &route_path, request, &response).await;
    print!("{}", report.text);
    if report.blocked {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// The recorded exchange: its path (empty when the files name none), request and answer.
async fn load(config: &Config, recorded: Recorded) -> Result<(String, Bytes, Bytes), String> {
    let record: CaptureRecord = match recorded {
        Recorded::Files { request, response } => {
            let read = |path: &Path| {
                std::fs::read(path).map_err(|error| {
                    format!(
                        "cannot read the recorded exchange ({}): {error}",
                        path.display()
                    )
                })
            };
            let (request, response) = (read(&request)?, read(&response)?);
            return Ok((String::new(), Bytes::from(request), Bytes::from(response)));
        }
        Recorded::CaptureFile(file) => {
            let text = std::fs::read(&file)
                .map_err(|error| format!("cannot read {}: {error}", file.display()))?;
            serde_json::from_slice(&text).map_err(|error| {
                format!("{} is not a captured exchange: {error}", file.display())
            })?
        }
        Recorded::Captured { id, admin } => {
            let admin = match (admin, config.server.admin_listen) {
                (Some(admin), _) => admin.trim_end_matches('/').to_owned(),
                (None, Some(address)) => format!("http://{address}"),
                (None, None) => {
                    return Err("the config has no admin_listen: give --admin URL".to_owned());
                }
            };
            let url = format!("{admin}/captures/{id}");
            crate::crypto::install();
            let response = reqwest::get(&url)
                .await
                .map_err(|error| format!("cannot ask {url}: {error}"))?;
            if !response.status().is_success() {
                return Err(format!(
                    "{url} answered {}: not captured, or gone from the ring",
                    response.status()
                ));
            }
            response
                .json()
                .await
                .map_err(|error| format!("{url} is not a captured exchange: {error}"))?
        }
    };
    Ok((record.path, record.request.0, record.response.0))
}

/// The verdict on one recorded exchange, as text for a person.
pub struct Report {
    pub blocked: bool,
    pub text: String,
}

/// The request's declared tools, as the report lists them.
fn describe_request(request: &Parsed<toolgate_formats::ToolRequest>, text: &mut String) {
    match request {
        Parsed::Parsed(parsed) => {
            let names: Vec<&str> = (parsed.declared_tools.iter())
                .map(|tool| tool.name.as_str())
                .collect();
            let names = match names.is_empty() {
                true => "(none)".to_owned(),
                false => names.join(", "),
            };
            text.push_str(&format!("declared tools: {names}\n"));
        }
        Parsed::Unparsable(error) => text.push_str(&format!("request: not understood ({error})\n")),
        Parsed::Absent => {}
    }
}

/// The answer's calls, as the report lists them.
fn describe_answer(answer: &Parsed<toolgate_formats::ToolResponse>, text: &mut String) {
    match answer {
        Parsed::Parsed(parsed) => {
            for call in &parsed.calls {
                text.push_str(&format!(
                    "tool call: choice {} {} ({}) arguments {}\n",
                    call.choice,
                    call.name,
                    call.id.as_deref().unwrap_or("no id"),
                    call.arguments
                ));
            }
            if parsed.calls.is_empty() {
                text.push_str("tool calls: (none)\n");
            }
        }
        Parsed::Unparsable(error) => {
            text.push_str(&format!("response: not understood ({error})\n"));
        }
        Parsed::Absent => {}
    }
}

/// The verdict the gateway would give `request` answered by `response` on `route`, stage by
/// stage, as one exchange runs it.
pub async fn explain(route: &Arc<Route>, path: &str, request: Bytes, response: &[u8]) -> Report {
    let meta = ExchangeMeta::new("explain", route.path.clone(), Method::POST, path);
    // The exchange the gateway would have run, stage by stage, without the sockets.
    let mut exchange = Exchange::new(meta, route.clone(), HeaderMap::new(), Instant::now());
    let format = route.format.resolve(path, Some(&request));
    let mut body = request;
    let read = match format.parse_request(body.clone()) {
        Ok(mut parsed) => {
            format.read_target(&mut parsed, path);
            Parsed::Parsed(parsed)
        }
        Err(error) => Parsed::Unparsable(error),
    };
    exchange.request_read(format, read);
    let mut text = String::new();
    let plugins: Vec<&str> = route.chain.names().collect();
    text.push_str(&format!(
        "route: {} (plugins: {})\n",
        route.path,
        plugins.join(", ")
    ));
    let outcome = exchange.pre_request(&mut body).await;
    describe_request(exchange.request(), &mut text);
    if outcome.blocked.is_some() {
        return finish(text, "request", &outcome, &exchange, &[]);
    }
    // What the model would be shown under `tool_disclosure`.
    if let Err(rejection) = exchange.disclose(&mut body).await {
        let outcome = StageOutcome {
            blocked: Some(rejection),
            blocked_by: vec!["tool_disclosure".to_owned()],
            ..StageOutcome::default()
        };
        return finish(text, "request", &outcome, &exchange, &[]);
    }
    if exchange.discloses() {
        let shown = format
            .tool_definitions(&body)
            .map(|tools| tools.len())
            .unwrap_or_default();
        text.push_str(&format!(
            "disclosure: the model is shown an index and {shown} definitions (the discovery tools and the loaded ones)\n"
        ));
    }

    // The answer is read as the gateway reads it: one exchange, the same reader.
    if toolgate_formats::answer::looks_like_event_stream(response) {
        exchange.streaming();
    }
    let parsed_response = match exchange.read_answer(response) {
        Ok(parsed) => parsed,
        Err(rejection) => {
            text.push_str("response: refused by the guard's reader\n");
            let outcome = StageOutcome {
                blocked: Some(*rejection),
                blocked_by: vec!["toolgate".to_owned()],
                ..StageOutcome::default()
            };
            return finish(text, "response", &outcome, &exchange, &[]);
        }
    };
    describe_answer(&parsed_response, &mut text);
    if let Parsed::Parsed(parsed) = &parsed_response {
        match exchange.discovery_round(&parsed.calls, None, true).await {
            Some(crate::exchange::Discovered::Again(_)) => {
                text.push_str("verdict: DISCOVERY ROUND — toolgate answers the model's discovery calls and asks it again; the client sees nothing of this answer\n");
                return Report {
                    blocked: false,
                    text,
                };
            }
            Some(crate::exchange::Discovered::Refused(rejection, _)) => {
                let outcome = StageOutcome {
                    blocked: Some(rejection),
                    blocked_by: vec!["tool_disclosure".to_owned()],
                    ..StageOutcome::default()
                };
                return finish(text, "response", &outcome, &exchange, &[]);
            }
            None => {}
        }
    }
    let outcome = exchange
        .pre_response(&parsed_response, StatusCode::OK)
        .await;
    let calls = match &parsed_response {
        Parsed::Parsed(parsed) => parsed.calls.as_slice(),
        _ => &[],
    };
    finish(text, "response", &outcome, &exchange, calls)
}

/// The verdict, and what the client gets for it: the route's `on_block` decides whether a
/// block of an answer reaches the client as the 403, as a 200 message, or as another attempt
/// of the model's (`calls` are the blocked answer's, for the feedback the model would read).
fn finish(
    mut text: String,
    stage: &str,
    outcome: &StageOutcome,
    exchange: &Exchange,
    calls: &[toolgate_formats::ToolCall],
) -> Report {
    for observed in &outcome.observed {
        text.push_str(&format!(
            "observed (not blocked) by {}: {}\n",
            observed.plugin,
            ErrorReport::of_rejection(&observed.rejection, "explain").message
        ));
    }
    match &outcome.blocked {
        Some(rejection) => {
            let by = outcome.blocked_by.join(", ");
            let on_block = match stage {
                "response" => outcome.on_block.unwrap_or(OnBlock::Error),
                _ => OnBlock::Error,
            };
            match on_block {
                OnBlock::Error => {
                    text.push_str(&format!(
                        "verdict: BLOCKED at {stage} by {by} — the client receives {}:\n",
                        rejection.status
                    ));
                    let body =
                        ErrorReport::of_rejection(rejection, "explain").body(exchange.format());
                    text.push_str(&serde_json::to_string_pretty(&body).unwrap_or_default());
                    text.push('\n');
                }
                OnBlock::Message => {
                    text.push_str(&format!(
                        "verdict: BLOCKED at {stage} by {by} — on_block = \"message\": the client receives 200 OK with this answer:\n"
                    ));
                    let answer = exchange.block_notice(rejection, exchange.is_streamed());
                    text.push_str(&String::from_utf8_lossy(&answer));
                    text.push('\n');
                }
                OnBlock::Retry(limits) => {
                    text.push_str(&format!(
                        "verdict: BLOCKED at {stage} by {by} — on_block = \"retry\": the client receives nothing of this answer; the model is asked again (up to {} more times) with each blocked call answered by:\n",
                        limits.max_retries
                    ));
                    let declared = match exchange.request() {
                        Parsed::Parsed(request) => request.declared_tools.to_vec(),
                        _ => Vec::new(),
                    };
                    for item in crate::on_block::feedback(calls, rejection, &declared) {
                        text.push_str(&format!("- {}: {}\n", item.call.name, item.result));
                    }
                }
            }
            Report {
                blocked: true,
                text,
            }
        }
        None => {
            text.push_str(
                "verdict: ALLOWED — the client receives the upstream's response unchanged\n",
            );
            Report {
                blocked: false,
                text,
            }
        }
    }
}
