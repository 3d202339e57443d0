//! A backend's progress notifications, relayed to the callers of the calls they are about and
//! always before those calls' answers.
//!
//! rmcp hands each notification to a task of its own and each answer straight to the call
//! waiting on it, so an answer can be back before the task relaying the call's last progress
//! has even started. The order is kept where it still exists, at the transport: every progress
//! notification is counted there as it is received, before the answer behind it can be, and a
//! call's answer waits until as many have been relayed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rmcp::model::{
    JsonRpcMessage, JsonRpcNotification, ProgressNotificationParam, ProgressToken,
    ServerNotification,
};
use rmcp::service::{Peer, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::{RoleClient, RoleServer};

/// Where a forwarded call's progress goes: the caller's session and the caller's own token.
pub struct ProgressRelay {
    pub session: Peer<RoleServer>,
    pub token: ProgressToken,
}

/// The progress routes of a backend's calls in flight, by the token each request went out with.
#[derive(Default)]
pub struct ProgressRoutes {
    routes: Mutex<HashMap<ProgressToken, OpenRoute>>,
    /// Told whenever a relay ends, for a route waiting to close.
    relayed: tokio::sync::Notify,
}

/// One call's route: where its progress goes, how many notifications the transport received
/// for it, and how many have been relayed.
struct OpenRoute {
    relay: ProgressRelay,
    received: usize,
    relayed: usize,
}

/// An open route; dropping it closes the route at once (the call was cancelled), and
/// [`ProgressRoute::close`] once its progress is relayed (the call was answered).
pub struct ProgressRoute<'a> {
    routes: &'a ProgressRoutes,
    token: ProgressToken,
}

/// The longest an answer waits for its call's progress to be relayed (a caller that does not
/// read its notifications must not hold its answer back for long).
const PROGRESS_SETTLE: Duration = Duration::from_secs(1);

impl ProgressRoutes {
    pub fn open(&self, token: ProgressToken, relay: ProgressRelay) -> ProgressRoute<'_> {
        self.lock().insert(
            token.clone(),
            OpenRoute {
                relay,
                received: 0,
                relayed: 0,
            },
        );
        ProgressRoute {
            routes: self,
            token,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<ProgressToken, OpenRoute>> {
        self.routes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The transport received a notification on `token`.
    fn received(&self, token: &ProgressToken) {
        if let Some(route) = self.lock().get_mut(token) {
            route.received += 1;
        }
    }

    /// Passes a backend's progress notification to the caller of the call it is about, under
    /// the caller's token; progress on a token no call in flight has is dropped.
    pub async fn relay(&self, mut params: ProgressNotificationParam) {
        let route = self
            .lock()
            .get(&params.progress_token)
            .map(|route| (route.relay.session.clone(), route.relay.token.clone()));
        let Some((session, token)) = route else {
            return;
        };
        let backend_token = std::mem::replace(&mut params.progress_token, token);
        if let Err(error) = session.notify_progress(params).await {
            tracing::debug!(%error, "a caller missed a progress notification");
        }
        if let Some(route) = self.lock().get_mut(&backend_token) {
            route.relayed += 1;
        }
        self.relayed.notify_waiters();
    }
}

impl ProgressRoute<'_> {
    /// Closes the route of an answered call once every notification the transport received
    /// for it before the answer has reached the caller.
    pub async fn close(self) {
        let settled = async {
            loop {
                let relayed = self.routes.relayed.notified();
                tokio::pin!(relayed);
                relayed.as_mut().enable();
                let pending = self
                    .routes
                    .lock()
                    .get(&self.token)
                    .is_some_and(|route| route.relayed < route.received);
                if !pending {
                    return;
                }
                relayed.await;
            }
        };
        if tokio::time::timeout(PROGRESS_SETTLE, settled)
            .await
            .is_err()
        {
            tracing::debug!("a call's progress was not all relayed before its answer");
        }
    }
}

impl Drop for ProgressRoute<'_> {
    fn drop(&mut self) {
        self.routes.lock().remove(&self.token);
    }
}

/// A backend's transport, counting each progress notification on its route as it arrives.
pub struct CountingTransport<T> {
    inner: T,
    routes: Arc<ProgressRoutes>,
}

impl<T> CountingTransport<T> {
    pub fn new(inner: T, routes: Arc<ProgressRoutes>) -> Self {
        CountingTransport { inner, routes }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for CountingTransport<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.inner.receive().await;
        if let Some(JsonRpcMessage::Notification(JsonRpcNotification {
            notification: ServerNotification::ProgressNotification(progress),
            ..
        })) = &message
        {
            self.routes.received(&progress.params.progress_token);
        }
        message
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
