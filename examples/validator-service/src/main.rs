//! The reference validator service as a program: `toolgate-example-validator [ADDR]` listens on
//! ADDR (default 127.0.0.1:8181) until Ctrl-C.

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let address = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8181".to_owned());
    let listener = match tokio::net::TcpListener::bind(&address).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("validator: cannot listen on {address}: {error}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!("validator: listening on http://{address}");
    toolgate_example_validator::serve(listener, async {
        // If the signal cannot be installed, run until killed.
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    })
    .await;
    ExitCode::SUCCESS
}
