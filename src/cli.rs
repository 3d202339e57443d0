//! The `toolgate` command line: `serve` (the default), `check`, `routes`, `explain` and `demo`.
//! Exit codes: 0 success; 1 a blocked verdict (`explain`) or a runtime failure; 2 a bad
//! configuration or bad arguments.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::Config;
use crate::server::{Gateway, Runtime};

#[derive(Debug, Parser)]
#[command(
    name = "toolgate",
    version,
    about = "A reverse proxy that enforces tool-call guardrails on OpenAI-format LLM APIs"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// The configuration file (for a bare `toolgate`, which serves).
    #[arg(
        long,
        short,
        global = false,
        env = "TOOLGATE_CONFIG",
        default_value = "gateway.toml"
    )]
    config: PathBuf,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the gateway.
    Serve {
        #[arg(long, short, env = "TOOLGATE_CONFIG", default_value = "gateway.toml")]
        config: PathBuf,
    },
    /// Validate a configuration; errors name the file, line, column and key.
    Check {
        #[arg(long, short, env = "TOOLGATE_CONFIG", default_value = "gateway.toml")]
        config: PathBuf,
    },
    /// Print the route table: each route's kind, upstream, format and plugins (in run order),
    /// longest prefix first, and the generation endpoints whose route reads no answers.
    Routes {
        #[arg(long, short, env = "TOOLGATE_CONFIG", default_value = "gateway.toml")]
        config: PathBuf,
    },
    /// Run a route's plugins offline on a recorded request and response, and print the verdict:
    /// from two files (--route, --request, --response), a captured exchange's file
    /// (--capture), or a running gateway's capture (--request-id).
    Explain {
        #[arg(long, short, env = "TOOLGATE_CONFIG", default_value = "gateway.toml")]
        config: PathBuf,
        /// The request path, as the client would send it (picks the route); with a capture,
        /// replaces its path.
        #[arg(long, required_unless_present_any = ["capture", "request_id"])]
        route: Option<String>,
        /// The recorded request body (JSON).
        #[arg(long, requires = "response", conflicts_with_all = ["capture", "request_id"])]
        request: Option<PathBuf>,
        /// The recorded response body (JSON, or an SSE stream).
        #[arg(long, requires = "request", conflicts_with_all = ["capture", "request_id"])]
        response: Option<PathBuf>,
        /// A captured exchange, as `GET /captures/{request_id}` on the admin listener serves it.
        #[arg(long, conflicts_with = "request_id")]
        capture: Option<PathBuf>,
        /// The request id of an exchange a running gateway captured, fetched from its admin
        /// listener (`--admin`, or the config's `admin_listen`).
        #[arg(long)]
        request_id: Option<String>,
        /// The admin listener's URL, for --request-id.
        #[arg(long)]
        admin: Option<String>,
    },
    /// Start the gateway against a built-in scripted upstream and show allowed and blocked
    /// exchanges as a client sees them. Offline.
    Demo,
    /// Ask the semantic judge a configuration names (its first tool_selection entry with a
    /// judge) about a labelled set of tool calls, and print its accuracy, false allows,
    /// unparsable verdicts and latency.
    JudgeEval {
        #[arg(long, short, env = "TOOLGATE_CONFIG", default_value = "gateway.toml")]
        config: PathBuf,
        /// A labelled set of one's own (JSON lines: user_request, tool, arguments, expected,
        /// and optionally reasoning); default: the set shipped with toolgate.
        #[arg(long)]
        cases: Option<PathBuf>,
    },
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    crate::crypto::install();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("toolgate: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match cli.command {
        None => runtime.block_on(serve(cli.config)),
        Some(Command::Serve { config }) => runtime.block_on(serve(config)),
        Some(Command::Check { config }) => check(config),
        Some(Command::Routes { config }) => routes(config),
        Some(Command::Explain {
            config,
            route,
            request,
            response,
            capture,
            request_id,
            admin,
        }) => {
            let plugins = Runtime::new();
            let Some(config) = load_config(&config, &plugins) else {
                return ExitCode::from(2);
            };
            let recorded = match (request, response, capture, request_id) {
                (Some(request), Some(response), _, _) => {
                    crate::explain::Recorded::Files { request, response }
                }
                (_, _, Some(file), _) => crate::explain::Recorded::CaptureFile(file),
                (_, _, _, Some(id)) => crate::explain::Recorded::Captured { id, admin },
                _ => {
                    eprintln!(
                        "toolgate explain: give --request and --response, --capture, or --request-id"
                    );
                    return ExitCode::from(2);
                }
            };
            runtime.block_on(crate::explain::run(&config, route.as_deref(), recorded))
        }
        Some(Command::Demo) => runtime.block_on(crate::demo::run()),
        Some(Command::JudgeEval { config, cases }) => {
            runtime.block_on(judge_eval(&config, cases.as_deref()))
        }
    }
}

/// `toolgate judge-eval`: the configuration is loaded whole (so a broken one says so first),
/// then the judge of its first tool_selection entry with one is scored on the labelled set.
async fn judge_eval(path: &std::path::Path, cases: Option<&std::path::Path>) -> ExitCode {
    use toolgate_tool_selection::judge_eval;
    let runtime = Runtime::new();
    if load_config(path, &runtime).is_none() {
        return ExitCode::from(2);
    }
    let settings = match crate::config::judge_settings(path) {
        Ok(Some(settings)) => settings,
        Ok(None) => {
            eprintln!(
                "{}: no tool_selection entry turns the judge on (openai_api_key)",
                path.display()
            );
            return ExitCode::from(2);
        }
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    let text = match cases {
        Some(file) => match std::fs::read_to_string(file) {
            Ok(text) => text,
            Err(error) => {
                eprintln!("cannot read {}: {error}", file.display());
                return ExitCode::from(2);
            }
        },
        None => judge_eval::SHIPPED_CASES.to_owned(),
    };
    let cases = match judge_eval::read_cases(&text) {
        Ok(cases) => cases,
        Err(error) => {
            eprintln!("{error}");
            return ExitCode::from(2);
        }
    };
    match judge_eval::evaluate(&settings, &cases).await {
        Ok(evaluation) => {
            print!("{evaluation}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("{error}");
            ExitCode::from(2)
        }
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("TOOLGATE_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Logs go to stderr; stdout carries audit lines and command output. Colour codes only for
    // a person at a terminal: in a file or a log collector they are noise around every field.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .try_init();
}

/// Loads a configuration, printing every error; `None` means exit 2.
pub fn load_config(path: &std::path::Path, runtime: &Runtime) -> Option<Config> {
    match Config::from_file(path, &runtime.plugins) {
        Ok(config) => Some(config),
        Err(errors) => {
            eprintln!("{errors}");
            None
        }
    }
}

async fn serve(path: PathBuf) -> ExitCode {
    let runtime = Runtime::new();
    let Some(config) = load_config(&path, &runtime) else {
        return ExitCode::from(2);
    };
    let gateway = match Gateway::bind(config, runtime).await {
        Ok(gateway) => gateway,
        Err(error) => {
            eprintln!("toolgate: cannot start: {error}");
            return ExitCode::FAILURE;
        }
    };
    crate::route_table::log(&gateway.state().config.load());
    if let Some(admin) = gateway.admin_addr() {
        tracing::info!(%admin, "admin endpoint: /health /ready /metrics");
    }
    let watcher = crate::reload::watch(gateway.state(), path, std::time::Duration::from_secs(2));
    let served = gateway.run(shutdown_signal()).await;
    watcher.abort();
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("toolgate: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut terminate =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                Ok(signal) => signal,
                Err(_) => {
                    let _ = interrupt.await;
                    return;
                }
            };
        tokio::select! {
            _ = interrupt => {}
            _ = terminate.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}

fn check(path: PathBuf) -> ExitCode {
    let runtime = Runtime::new();
    match load_config(&path, &runtime) {
        Some(config) => {
            let routes = config.router.routes().count();
            println!(
                "{}: ok ({routes} route{})",
                path.display(),
                if routes == 1 { "" } else { "s" }
            );
            ExitCode::SUCCESS
        }
        None => ExitCode::from(2),
    }
}

fn routes(path: PathBuf) -> ExitCode {
    let runtime = Runtime::new();
    let Some(config) = load_config(&path, &runtime) else {
        return ExitCode::from(2);
    };
    println!("{}: routes, longest prefix first", path.display());
    for line in crate::route_table::table(&config.router) {
        println!("  {line}");
    }
    for warning in crate::route_table::unguarded(&config.router) {
        println!("warning: {warning}");
    }
    ExitCode::SUCCESS
}
