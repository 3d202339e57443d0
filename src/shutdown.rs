//! The end of the shutdown grace, as the exchanges still running see it: a signal, and what
//! they answer then — a 503 in the client's format when no head was sent yet, or the format's
//! error event ending a stream already started — so a client can tell a shutdown (retry
//! elsewhere) from a crash rather than finding its connection dropped.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use tokio::sync::watch;
use toolgate_formats::sse::SseBoundary;
use toolgate_plugin::WireFormat;

use crate::body::{BoxError, FramePoll, ProxyBody};
use crate::connections::DrainSignal;
use crate::error::GatewayError;

/// Fired by the listener when the grace period runs out with exchanges still in flight.
pub struct GraceEnd(watch::Sender<bool>);

/// What an exchange watches to learn that the grace is over.
#[derive(Clone)]
pub struct GraceOver(watch::Receiver<bool>);

impl GraceEnd {
    pub fn new() -> (GraceEnd, GraceOver) {
        let (sender, receiver) = watch::channel(false);
        (GraceEnd(sender), GraceOver(receiver))
    }

    pub fn fire(&self) {
        self.0.send_replace(true);
    }
}

impl GraceOver {
    /// Completes when the grace is over; never, if the gateway ends without one running out.
    pub fn arrived(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut receiver = self.0.clone();
        async move {
            if receiver.wait_for(|over| *over).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// `serving`'s output, or `None` if the grace runs out first.
    ///
    /// Watching the grace registers a waiter under the channel's lock, and dropping it takes
    /// the lock again: for every exchange, though a grace runs out only after a drain began.
    /// So where the drain's beginning runs the exchange again (`drain`), the grace is watched
    /// only from then on; elsewhere from the start.
    ///
    /// `serving` comes pinned by the caller: moved in, it would take a second slot of the
    /// exchange's state, the size of the whole exchange.
    pub async fn unless_over<F: Future>(
        &self,
        mut serving: Pin<&mut F>,
        drain: &DrainSignal,
    ) -> Option<F::Output> {
        let mut grace_over = None;
        std::future::poll_fn(|cx| {
            if let Poll::Ready(output) = serving.as_mut().poll(cx) {
                return Poll::Ready(Some(output));
            }
            if grace_over.is_none() && (!drain.runs_exchanges_again() || drain.began()) {
                grace_over = Some(Box::pin(self.arrived()));
            }
            match grace_over.as_mut().map(|over| over.as_mut().poll(cx)) {
                Some(Poll::Ready(())) => Poll::Ready(None),
                _ => Poll::Pending,
            }
        })
        .await
    }
}

/// An event stream passed through unchecked, ended with the format's error event when the grace
/// runs out. The event goes only where the client reads it as an event of its own, between two
/// events of the upstream's; cut inside one, the stream is aborted instead, so the client sees a
/// broken stream rather than a spliced event.
pub struct CutAtGraceEnd {
    inner: ProxyBody,
    /// In a mutex only to be `Sync`, as every body toolgate sends must be: it is polled through
    /// `&mut`, never locked.
    grace_over: std::sync::Mutex<Pin<Box<dyn Future<Output = ()> + Send>>>,
    boundary: SseBoundary,
    format: WireFormat,
    request_id: String,
    ended: bool,
}

impl CutAtGraceEnd {
    pub fn new(
        inner: ProxyBody,
        grace: &GraceOver,
        format: WireFormat,
        request_id: String,
    ) -> Self {
        CutAtGraceEnd {
            inner,
            grace_over: std::sync::Mutex::new(Box::pin(grace.arrived())),
            boundary: SseBoundary::new(),
            format,
            request_id,
            ended: false,
        }
    }
}

impl Body for CutAtGraceEnd {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> FramePoll {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        let grace_over = match this.grace_over.get_mut() {
            Ok(future) => future,
            Err(poisoned) => poisoned.into_inner(),
        };
        if grace_over.as_mut().poll(cx).is_ready() {
            this.ended = true;
            if !this.boundary.between_events() {
                return Poll::Ready(Some(Err(Box::new(GatewayError::shutting_down()))));
            }
            let frame = GatewayError::shutting_down()
                .report(&this.request_id)
                .sse_frame(this.format, this.boundary.events());
            return Poll::Ready(Some(Ok(Frame::data(frame))));
        }
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled
            && let Some(data) = frame.data_ref()
        {
            this.boundary.push(data);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
