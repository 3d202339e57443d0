//! `toolgate explain`: runs a route's plugins on a recorded request and response, offline, and
//! prints what the client would have received and why — for debugging a 403 without traffic.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderMap, Method, StatusCode};
use toolgate_plugin::{ExchangeMeta, Parsed, WireFormat};

use crate::config::Config;
use crate::error::ErrorReport;
use crate::exchange::Exchange;
use crate::pipeline::StageOutcome;
use crate::router::Route;

/// `toolgate explain` on a loaded config: exit 0 allowed, 1 blocked, 2 bad input.
pub async fn run(config: &Config, route_path: &str, request: &Path, response: &Path) -> ExitCode {
    let Some(route) = config.router.find(route_path).cloned() else {
        eprintln!("toolgate explain: no route matches '{route_path}'");
        return ExitCode::from(2);
    };
    let (request, response) = match (std::fs::read(request), std::fs::read(response)) {
        (Ok(request), Ok(response)) => (Bytes::from(request), Bytes::from(response)),
        (Err(error), _) | (_, Err(error)) => {
            eprintln!("toolgate explain: cannot read the recorded exchange: {error}");
            return ExitCode::from(2);
        }
    };
    let report = explain(&route, route_path, request, &response).await;
    print!("{}", report.text);
    if report.blocked {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
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
        return finish(text, "request", &outcome, format);
    }
    // What the model would be shown under `tool_disclosure`.
    if let Err(rejection) = exchange.disclose(&mut body).await {
        let outcome = StageOutcome {
            blocked: Some(rejection),
            blocked_by: vec!["tool_disclosure".to_owned()],
            ..StageOutcome::default()
        };
        return finish(text, "request", &outcome, format);
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
            return finish(text, "response", &outcome, format);
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
                return finish(text, "response", &outcome, format);
            }
            None => {}
        }
    }
    let outcome = exchange
        .pre_response(&parsed_response, StatusCode::OK)
        .await;
    finish(text, "response", &outcome, format)
}

fn finish(mut text: String, stage: &str, outcome: &StageOutcome, shape: WireFormat) -> Report {
    for observed in &outcome.observed {
        text.push_str(&format!(
            "observed (not blocked) by {}: {}\n",
            observed.plugin,
            ErrorReport::of_rejection(&observed.rejection, "explain").message
        ));
    }
    match &outcome.blocked {
        Some(rejection) => {
            text.push_str(&format!(
                "verdict: BLOCKED at {stage} by {} — the client receives {}:\n",
                outcome.blocked_by.join(", "),
                rejection.status
            ));
            let body = ErrorReport::of_rejection(rejection, "explain").body(shape);
            text.push_str(&serde_json::to_string_pretty(&body).unwrap_or_default());
            text.push('\n');
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
