//! A panic while handling a request is a bug, yet its client must still get an answer. Each
//! request's work runs through [`contained`]: a panic inside it is logged with the request's
//! id and turned into `None`, which the caller answers as an internal error. Nothing of the
//! exchange is released by it: the client gets the error, never an answer that was being checked.
//! Without it, an LLM client's connection was dropped, and an MCP caller waited on a session
//! whose task had died until its own timeout.

use std::any::Any;
use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;

/// Runs `work`; `None` if it panicked. Built from combinators, not as an `async fn`: one of
/// those keeps its by-value argument and the future made of it as two slots of its state, which
/// would double the state of every exchange waiting on its upstream.
pub(crate) fn contained<'a, F: Future + 'a>(
    request_id: &'a str,
    work: F,
) -> impl Future<Output = Option<F::Output>> + 'a {
    // Unwind safety is asserted: what a panicking exchange leaves behind is its own state,
    // dropped with it, and shared state behind locks that report their poisoning.
    AssertUnwindSafe(work)
        .catch_unwind()
        .map(move |outcome| match outcome {
            Ok(output) => Some(output),
            Err(panic) => {
                tracing::error!(
                    request_id = %request_id,
                    panic = panic_message(panic.as_ref()),
                    "handling the request panicked; it is answered as an internal error"
                );
                None
            }
        })
}

/// The message a panic was raised with, where it has one.
fn panic_message(panic: &(dyn Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// What a client whose request panicked reads: no detail of the fault, which is the
/// operator's to read in the log under the request's id.
pub(crate) const PANICKED: &str =
    "toolgate failed while handling this request (an internal fault, logged with the request id)";
