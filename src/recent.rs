//! The audit ring the console reads: the latest audit lines, newest first, and their live
//! stream to the consoles watching. Kept by the gateway's state, written once per audited
//! exchange.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::broadcast;

/// How many recent exchanges the console lists.
const RECENT: usize = 500;

/// The audit ring: the latest audit lines, and their stream to the consoles watching.
pub struct RecentExchanges {
    ring: Mutex<VecDeque<(String, Arc<str>)>>,
    live: broadcast::Sender<Arc<str>>,
}

impl Default for RecentExchanges {
    fn default() -> Self {
        RecentExchanges {
            ring: Mutex::new(VecDeque::with_capacity(RECENT)),
            live: broadcast::channel(256).0,
        }
    }
}

impl RecentExchanges {
    /// Keeps one audit line; sent to the consoles watching, if any.
    pub fn push(&self, request_id: &str, line: Arc<str>) {
        let mut ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        if ring.len() == RECENT {
            ring.pop_front();
        }
        ring.push_back((request_id.to_owned(), line.clone()));
        drop(ring);
        if self.live.receiver_count() > 0 {
            let _ = self.live.send(line);
        }
    }

    pub fn newest_first(&self) -> Vec<Arc<str>> {
        let ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        ring.iter().rev().map(|(_, line)| line.clone()).collect()
    }

    pub fn find(&self, request_id: &str) -> Option<Arc<str>> {
        let ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        (ring.iter().rev())
            .find(|(id, _)| id == request_id)
            .map(|(_, line)| line.clone())
    }

    /// The audit lines pushed from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<str>> {
        self.live.subscribe()
    }
}
