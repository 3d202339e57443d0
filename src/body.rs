//! The body type the gateway sends both ways, and its constructors: whole buffers, nothing,
//! the upstream's body passed through, or frames fed from a task through a channel.

use std::pin::Pin;
use std::task::{Context, Poll};

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

/// Passes a body through untouched (streamed, never buffered).
pub fn passthrough<B>(body: B) -> ProxyBody
where
    B: Body<Data = Bytes> + Send + Sync + 'static,
    B::Error: Into<BoxError>,
{
    body.map_err(Into::into).boxed()
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
