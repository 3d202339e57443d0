//! The rounds of one exchange, whatever carries its answer: an upstream answer is read and
//! checked; while the route recovers from a block before anything reached the client, the
//! conversation goes upstream again and the new answer is read the same way. The one loop for
//! whole answers and streams: each brings only how it reads an answer and what the client gets
//! when a retry has no usable answer. `docs/exchange.md` draws it.

use std::future::Future;

use bytes::Bytes;
use http::Response;
use hyper::body::Incoming;
use toolgate_plugin::Rejection;

use crate::error::GatewayError;
use crate::exchange::Exchange;

/// What reading one upstream answer came to.
pub enum Round<T> {
    /// The client's answer is decided: passed, blocked, failed, or already on its way.
    Answered(T),
    /// Blocked with nothing sent, and the route retries: this conversation goes upstream again.
    Again(Bytes),
    /// A retry's answer is not one this transport reads (an error status, another kind of
    /// body, a failure before anything reached the client): the client gets the block it
    /// retried.
    Unusable(Option<GatewayError>),
}

/// How one kind of exchange reads its upstream answers and answers its client.
pub trait Transport {
    /// What the client is given (a response, or nothing when a relay sends it itself).
    type Answer;

    fn exchange(&mut self) -> &mut Exchange;

    /// Reads and checks one upstream answer: `None` for the first, which the transport was
    /// made with, then each retry's.
    fn read(
        &mut self,
        retry: Option<Response<Incoming>>,
    ) -> impl Future<Output = Round<Self::Answer>> + Send;

    /// The client's answer when a retry had no usable answer: `rejection`, the block that
    /// retry answered, as if it had not been tried.
    fn answer_block(&mut self, rejection: Rejection) -> impl Future<Output = Self::Answer> + Send;

    /// The client's answer when the exchange cannot go on at all.
    fn answer_error(&mut self, error: GatewayError) -> impl Future<Output = Self::Answer> + Send;
}

/// Reads answers until the client's is decided.
pub async fn run<T: Transport + Send>(transport: &mut T) -> T::Answer {
    let mut retry = None;
    loop {
        // Boxed: a retry is rare, and the read's state would otherwise be part of every
        // exchange's state for its whole life.
        let request = match Box::pin(transport.read(retry.take())).await {
            Round::Answered(answer) => return answer,
            Round::Again(request) => request,
            Round::Unusable(error) => return retry_failed(transport, error).await,
        };
        match Box::pin(transport.exchange().resend(request)).await {
            Ok(response) => retry = Some(response),
            Err(error) => return retry_failed(transport, Some(error)).await,
        }
    }
}

async fn retry_failed<T: Transport>(transport: &mut T, error: Option<GatewayError>) -> T::Answer {
    let exchange = transport.exchange();
    if let Some(error) = &error {
        tracing::warn!(request_id = %exchange.meta().request_id, code = error.code, message = %error.message, "a retry failed; answering the block it retried");
    }
    match exchange.retry_failed(error.as_ref()) {
        Some(rejection) => transport.answer_block(rejection).await,
        None => {
            let error = error.unwrap_or_else(|| {
                GatewayError::internal(
                    "an answer was refused as a retry's where none was under way",
                )
            });
            transport.answer_error(error).await
        }
    }
}
