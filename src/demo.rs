//! `toolgate demo`: a guided tour that needs no network. It starts a scripted upstream that
//! replays the recorded answers in `fixtures/` (compiled in), starts the gateway in front of it
//! with tool_selection on, sends allowed and blocked exchanges — plain and streamed — and prints
//! what a client sees.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::process::ExitCode;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use tokio::net::TcpListener;

use crate::config::Config;
use crate::server::{Gateway, Runtime};

/// One exchange of the tour: what the client sends, what the scripted model answers.
struct Scenario {
    name: &'static str,
    about: &'static str,
    request: &'static str,
    answer: &'static str,
    streamed: bool,
}

macro_rules! chat_fixture {
    ($name:literal, $about:literal) => {
        Scenario {
            name: $name,
            about: $about,
            request: include_str!(concat!("../fixtures/chat/", $name, ".request.json")),
            answer: include_str!(concat!("../fixtures/chat/", $name, ".response.json")),
            streamed: false,
        }
    };
}

/// A streamed exchange: the model streams some text, then a `get_weather` call.
fn streamed_scenario(name: &'static str, about: &'static str, request: &'static str) -> Scenario {
    Scenario {
        name,
        about,
        request,
        answer: include_str!("../fixtures/streams/text_then_tool_call.sse"),
        streamed: true,
    }
}

fn scenarios() -> Vec<Scenario> {
    vec![
        chat_fixture!(
            "weather_allowed",
            "a declared tool called with valid arguments"
        ),
        chat_fixture!(
            "undeclared_tool",
            "the model calls delete_user, which the client never declared"
        ),
        chat_fixture!(
            "schema_missing_required",
            "send_email called without its required `to`"
        ),
        chat_fixture!(
            "transfer_funds_negative_amount",
            "a payment with a negative amount"
        ),
        chat_fixture!(
            "n2_second_choice_bad",
            "n=2, and the second choice calls an undeclared tool"
        ),
        streamed_scenario(
            "stream_allowed",
            "streamed: text, then a valid get_weather call (held, checked, released)",
            include_str!("../fixtures/chat/weather_allowed.request.json"),
        ),
        streamed_scenario(
            "stream_blocked",
            "streamed: text, then a call to a tool this request never declared",
            include_str!("../fixtures/chat/undeclared_tool.request.json"),
        ),
    ]
}

// Not an `x-toolgate-*` header: those are toolgate's own and never reach the (scripted) upstream.
const SCENARIO_HEADER: &str = "x-demo-scenario";

pub async fn run() -> ExitCode {
    match tour().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("toolgate demo: {error}");
            ExitCode::FAILURE
        }
    }
}

async fn tour() -> Result<(), Box<dyn std::error::Error>> {
    let upstream = start_scripted_upstream().await?;
    let text = format!(
        "[server]\nlisten = \"127.0.0.1:0\"\nadmin_listen = \"off\"\n\n\
         [upstreams.scripted]\nurl = \"http://{upstream}\"\n\n[audit]\noutput = \"off\"\n\n\
         [[plugins]]\nname = \"tool_selection\"\n\n\
         [[routes]]\npath = \"/v1/chat/completions\"\nupstream = \"scripted\"\n"
    );
    let runtime = Runtime::new();
    let config = Config::from_toml(&text, "demo.toml", &runtime.plugins)?;
    let gateway = Gateway::bind(config, runtime).await?;
    let address = gateway.local_addr()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(gateway.run(async {
        let _ = stopped.await;
    }));

    println!(
        "toolgate demo: a gateway on http://{address} in front of a scripted model on http://{upstream}"
    );
    println!("Each exchange is sent as a client would; this is what the client receives.\n");
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    for scenario in scenarios() {
        let mut body: Value = serde_json::from_str(scenario.request)?;
        if scenario.streamed {
            body["stream"] = Value::Bool(true);
        }
        let request = Request::post(format!("http://{address}/v1/chat/completions"))
            .header("content-type", "application/json")
            .header(SCENARIO_HEADER, scenario.name)
            .body(Full::new(Bytes::from(body.to_string())))?;
        let response = client.request(request).await?;
        let status = response.status();
        let bytes = response.into_body().collect().await?.to_bytes();
        println!("── {}: {}", scenario.name, scenario.about);
        println!(
            "   POST /v1/chat/completions{} → {status}",
            if scenario.streamed { " (stream)" } else { "" }
        );
        describe(status, &bytes);
        println!();
    }
    let _ = stop.send(());
    serving.await??;
    Ok(())
}

/// Prints the part of an answer a person cares about: the calls, or why they were blocked.
fn describe(status: StatusCode, body: &[u8]) {
    let text = String::from_utf8_lossy(body);
    if let Ok(json) = serde_json::from_slice::<Value>(body) {
        if let Some(error) = json.get("error") {
            describe_error(error);
        }
        for choice in json["choices"].as_array().into_iter().flatten() {
            for call in choice["message"]["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
            {
                println!(
                    "   tool call: {} {}",
                    call["function"]["name"].as_str().unwrap_or("?"),
                    call["function"]["arguments"].as_str().unwrap_or("")
                );
            }
        }
        return;
    }
    // A stream: show the text, the released calls, and how it ended.
    let mut content = String::new();
    let mut ended_cleanly = false;
    for line in text.lines().filter_map(|line| line.strip_prefix("data: ")) {
        if line.trim() == "[DONE]" {
            ended_cleanly = true;
            continue;
        }
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if let Some(error) = event.get("error") {
            println!("   text streamed before the block: {content:?}");
            describe_error(error);
            println!("   the stream ends without [DONE]");
            return;
        }
        for choice in event["choices"].as_array().into_iter().flatten() {
            content.push_str(choice["delta"]["content"].as_str().unwrap_or_default());
            for call in choice["delta"]["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
            {
                if let Some(name) = call["function"]["name"].as_str() {
                    println!("   tool call released: {name}");
                }
            }
        }
    }
    if status.is_success() {
        println!("   text: {content:?}");
        println!(
            "   {}",
            if ended_cleanly {
                "the stream ends with [DONE]"
            } else {
                "the stream ended"
            }
        );
    }
}

fn describe_error(error: &Value) {
    println!(
        "   error: {}",
        error["message"].as_str().unwrap_or_default()
    );
    println!(
        "   code: {}  request_id: {}",
        error["code"].as_str().unwrap_or_default(),
        error["request_id"].as_str().unwrap_or_default()
    );
    for violation in error["violations"].as_array().into_iter().flatten() {
        let location = match violation["instance_path"].as_str() {
            Some(path) => format!(
                " at '{path}' ({})",
                violation["keyword"].as_str().unwrap_or_default()
            ),
            None => String::new(),
        };
        println!(
            "   violation: {} on {} (choice {}){location}",
            violation["check"].as_str().unwrap_or_default(),
            violation["tool"].as_str().unwrap_or("?"),
            violation["choice"],
        );
    }
}

/// A model that answers each scenario with its recorded answer.
async fn start_scripted_upstream() -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let service = service_fn(|request: Request<Incoming>| async move {
                    Ok::<_, Infallible>(replay(&request))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    Ok(address)
}

fn replay(request: &Request<Incoming>) -> Response<Full<Bytes>> {
    let wanted = request
        .headers()
        .get(SCENARIO_HEADER)
        .and_then(|value| value.to_str().ok());
    let scenario = scenarios()
        .into_iter()
        .find(|scenario| Some(scenario.name) == wanted);
    let (status, content_type, body) = match scenario {
        Some(scenario) if scenario.streamed => {
            (StatusCode::OK, "text/event-stream", scenario.answer)
        }
        Some(scenario) => (StatusCode::OK, "application/json", scenario.answer),
        None => (
            StatusCode::NOT_FOUND,
            "application/json",
            r#"{"error":{"message":"unknown demo scenario"}}"#,
        ),
    };
    let mut response = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *response.status_mut() = status;
    if let Ok(value) = http::HeaderValue::from_str(content_type) {
        response
            .headers_mut()
            .insert(http::header::CONTENT_TYPE, value);
    }
    response
}
