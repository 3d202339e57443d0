//! The client's request body as toolgate reads it, on every route: capped at
//! `max_request_body_bytes`, cut when silent too long or slower than its whole deadline, and
//! refused when its framing is malformed. The fault is remembered, so the exchange answers it as
//! the client's (413, 408, 400) even when the body was streaming to an upstream, whose failure
//! would otherwise read as the upstream's (502).

use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::time::Instant;

use crate::body::{BoxError, FramePoll, WaitDeadline, collect_limited, error_chain};
use crate::config::ServerConfig;
use crate::error::GatewayError;

/// Why a client's request body was refused.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientBodyFault {
    #[error("the request body exceeds the gateway's limit of {0} bytes")]
    TooLarge(usize),
    #[error("the request body sent nothing for {0:?}")]
    Silent(Duration),
    #[error("the request body was not complete within its deadline of {0:?}")]
    TooSlow(Duration),
    #[error("the request body could not be read: {0}")]
    Unreadable(String),
}

impl ClientBodyFault {
    pub fn to_error(&self) -> GatewayError {
        match self {
            ClientBodyFault::TooLarge(limit) => GatewayError::request_too_large(*limit),
            ClientBodyFault::Silent(_) | ClientBodyFault::TooSlow(_) => {
                GatewayError::request_timeout(self.to_string())
            }
            ClientBodyFault::Unreadable(_) => GatewayError::bad_request(self.to_string()),
        }
    }
}

/// Where a [`ClientBody`] leaves its fault for the exchange that handed the body on.
#[derive(Debug, Clone, Default)]
pub struct FaultRecord(Arc<OnceLock<ClientBodyFault>>);

impl FaultRecord {
    pub fn get(&self) -> Option<&ClientBodyFault> {
        self.0.get()
    }
}

/// A client's request body under the server's limits.
pub struct ClientBody<B> {
    inner: B,
    limit: usize,
    received: usize,
    silence: Duration,
    /// The whole body's deadline, if it has one, and when it ends: counted from the body's
    /// first wait, so a body that comes whole with its head reads no clock.
    deadline: Option<Duration>,
    complete_by: Option<Instant>,
    /// Since when the body waits: its first wait after a frame. `None` while it has not
    /// waited since; the silence is counted from here.
    waiting_since: Option<Instant>,
    /// The nearer of the silence timeout and the whole body's deadline, while the body waits.
    timer: WaitDeadline,
    fault: FaultRecord,
}

impl<B> ClientBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::error::Error,
{
    pub fn new(inner: B, server: &ServerConfig) -> Self {
        ClientBody {
            inner,
            limit: server.max_request_body_bytes,
            received: 0,
            silence: server.request_body_timeout,
            deadline: server.request_body_deadline,
            complete_by: None,
            waiting_since: None,
            timer: WaitDeadline::default(),
            fault: FaultRecord::default(),
        }
    }

    /// Where this body's fault, if it has one, will be found.
    pub fn fault_record(&self) -> FaultRecord {
        self.fault.clone()
    }

    /// The body announces (by its `content-length`) more than the limit allows.
    pub fn announced_too_large(&self) -> Option<ClientBodyFault> {
        (self.inner.size_hint().lower() > self.limit as u64)
            .then_some(ClientBodyFault::TooLarge(self.limit))
    }

    /// Reads the whole body, for the plugins that need it.
    pub async fn read_whole(self) -> Result<Bytes, ClientBodyFault> {
        let limit = self.limit;
        let record = self.fault_record();
        match collect_limited(self, limit).await {
            Ok(Some(bytes)) => Ok(bytes),
            Ok(None) => Err(ClientBodyFault::TooLarge(limit)),
            Err(error) => Err(record
                .get()
                .cloned()
                .unwrap_or_else(|| ClientBodyFault::Unreadable(error.to_string()))),
        }
    }

    /// When the body fails if nothing more comes, it waiting since `since`.
    fn next_deadline(&self, since: Instant) -> Instant {
        let silent_at = since + self.silence;
        match self.complete_by {
            Some(complete_by) => silent_at.min(complete_by),
            None => silent_at,
        }
    }

    fn fail(&mut self, fault: ClientBodyFault) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let error = Box::new(fault.clone());
        let _ = self.fault.0.set(fault);
        Poll::Ready(Some(Err(error)))
    }

    fn late(&self, now: Instant) -> Option<ClientBodyFault> {
        let complete_by = self.complete_by?;
        (now >= complete_by).then_some(ClientBodyFault::TooSlow(self.deadline?))
    }
}

impl<B> Body for ClientBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::error::Error,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll {
        let this = self.get_mut();
        if this.fault.get().is_some() {
            return Poll::Ready(None);
        }
        if let Some(fault) = this.announced_too_large() {
            return this.fail(fault);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.received = this.received.saturating_add(data.len());
                    if this.received > this.limit {
                        return this.fail(ClientBodyFault::TooLarge(this.limit));
                    }
                }
                this.waiting_since = None;
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                this.fail(ClientBodyFault::Unreadable(error_chain(&error)))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                let since = match this.waiting_since {
                    Some(since) => since,
                    // A wait after a frame (or the first): the silence starts now, and a body
                    // still coming after its whole deadline is cut here, though never silent.
                    None => {
                        let now = Instant::now();
                        if let Some(deadline) = this.deadline {
                            this.complete_by.get_or_insert(now + deadline);
                        }
                        if let Some(fault) = this.late(now) {
                            return this.fail(fault);
                        }
                        *this.waiting_since.insert(now)
                    }
                };
                match this.timer.poll_at(this.next_deadline(since), cx) {
                    Poll::Ready(()) => {
                        let fault = this
                            .late(Instant::now())
                            .unwrap_or(ClientBodyFault::Silent(this.silence));
                        this.fail(fault)
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.fault.get().is_some() || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use http_body_util::{BodyExt, StreamBody};

    use super::*;

    fn server(limit: usize, deadline: Option<Duration>) -> ServerConfig {
        ServerConfig {
            listen: ([127, 0, 0, 1], 0).into(),
            admin_listen: None,
            admin_token: None,
            protect_metrics: false,
            max_request_body_bytes: limit,
            max_response_body_bytes: limit,
            shutdown_grace: Duration::from_secs(1),
            header_read_timeout: Duration::from_secs(1),
            request_body_timeout: Duration::from_secs(1),
            request_body_deadline: deadline,
            max_connections: 1,
            first_byte_timeout: Duration::from_secs(1),
            handshake_timeout: Duration::from_secs(1),
            idle_timeout: Duration::from_secs(1),
            write_timeout: Duration::from_secs(1),
            http2_keep_alive_interval: Duration::from_secs(1),
            http2_keep_alive_timeout: Duration::from_secs(1),
        }
    }

    /// A body that sends one byte every `gap`, forever.
    fn trickle(
        gap: Duration,
    ) -> impl Body<Data = Bytes, Error = std::io::Error> + Unpin + Send + 'static {
        let (sender, receiver) = tokio::sync::mpsc::channel(1);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(gap).await;
                let frame: Result<Frame<Bytes>, std::io::Error> =
                    Ok(Frame::data(Bytes::from_static(b"x")));
                if sender.send(frame).await.is_err() {
                    break;
                }
            }
        });
        StreamBody::new(tokio_stream_of(receiver))
    }

    fn tokio_stream_of<T>(
        mut receiver: tokio::sync::mpsc::Receiver<T>,
    ) -> impl futures_util::Stream<Item = T> + Unpin {
        Box::pin(futures_util::stream::poll_fn(move |cx| {
            receiver.poll_recv(cx)
        }))
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickled_body_is_cut_at_its_deadline_though_never_silent() {
        let body = ClientBody::new(
            trickle(Duration::from_millis(300)),
            &server(1024, Some(Duration::from_secs(2))),
        );
        let fault = body.read_whole().await.expect_err("cut");
        assert!(matches!(fault, ClientBodyFault::TooSlow(_)), "{fault:?}");
        assert_eq!(fault.to_error().status, 408);
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_past_the_limit_is_refused_and_the_fault_kept() {
        let body = ClientBody::new(trickle(Duration::from_millis(1)), &server(10, None));
        let record = body.fault_record();
        let mut body = body;
        while let Some(frame) = body.frame().await {
            if frame.is_err() {
                break;
            }
        }
        assert!(matches!(record.get(), Some(ClientBodyFault::TooLarge(10))));
    }
}
