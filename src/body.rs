//! The body type the gateway sends both ways, and its constructors: whole buffers, nothing,
//! the upstream's body passed through, or frames fed from a task through a channel.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, Full};
use tokio::sync::mpsc;

pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Every body toolgate writes, to a client or to an upstream.
pub type ProxyBody = BoxBody<Bytes, BoxError>;

pub fn full(bytes: impl Into<Bytes>) -> ProxyBody {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed()
}

pub fn empty() -> ProxyBody {
    Empty::new().map_err(|never| match never {}).boxed()
}

/// Passes a body through untouched (streamed, never buffered), failing it if its source goes
/// silent for longer than `idle`.
pub fn passthrough<B>(body: B, idle: Duration) -> ProxyBody
where
    B: Body<Data = Bytes> + Send + Sync + Unpin + 'static,
    B::Error: Into<BoxError>,
{
    IdleTimeout::new(body, idle).boxed()
}

/// A body whose frames a task sends as they become ready. The stream ends when the sender is
/// dropped; an `Err` ends it with an error, so the client sees an aborted body rather than a
/// clean end.
pub struct ChannelBody {
    receiver: mpsc::Receiver<Result<Bytes, BoxError>>,
}

impl ChannelBody {
    pub fn channel(capacity: usize) -> (mpsc::Sender<Result<Bytes, BoxError>>, ProxyBody) {
        let (sender, receiver) = mpsc::channel(capacity);
        (sender, ChannelBody { receiver }.boxed())
    }
}

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.receiver
            .poll_recv(cx)
            .map(|frame| frame.map(|result| result.map(Frame::data)))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}

/// A body that fails when its source stays silent longer than `timeout` between frames, so a
/// stalled peer cannot pin a connection (and a task) forever.
pub struct IdleTimeout<B> {
    inner: B,
    timeout: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl<B> IdleTimeout<B> {
    pub fn new(inner: B, timeout: Duration) -> Self {
        IdleTimeout {
            inner,
            timeout,
            deadline: Box::pin(tokio::time::sleep(timeout)),
        }
    }
}

/// The error an idle body ends with.
#[derive(Debug, thiserror::Error)]
#[error("no data for {0:?}")]
pub struct IdleTimeoutError(pub Duration);

impl<B> Body for IdleTimeout<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(frame) => {
                let next = tokio::time::Instant::now() + this.timeout;
                this.deadline.as_mut().reset(next);
                Poll::Ready(frame.map(|result| result.map_err(Into::into)))
            }
            Poll::Pending => match this.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(IdleTimeoutError(this.timeout))))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Reads a whole body, refusing more than `limit` bytes. `Ok(None)` means the limit was hit.
pub async fn collect_limited<B>(mut body: B, limit: usize) -> Result<Option<Bytes>, BoxError>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    if body.size_hint().lower() > limit as u64 {
        return Ok(None);
    }
    let mut buffer = bytes::BytesMut::new();
    let mut single: Option<Bytes> = None;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(Into::into)?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let held = single.as_ref().map_or(0, Bytes::len) + buffer.len();
        if held + data.len() > limit {
            return Ok(None);
        }
        // Most bodies arrive in one frame: keep it as is rather than copy it.
        match single.take() {
            None if buffer.is_empty() => single = Some(data),
            Some(first) => {
                buffer.extend_from_slice(&first);
                buffer.extend_from_slice(&data);
            }
            None => buffer.extend_from_slice(&data),
        }
    }
    Ok(Some(single.unwrap_or_else(|| buffer.freeze())))
}
