//! `toolgate demo` (being written).
use std::process::ExitCode;
pub async fn run() -> ExitCode {
    ExitCode::SUCCESS
}
