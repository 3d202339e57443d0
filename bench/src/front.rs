//! A TCP front for the soak's MCP backends: it forwards each new connection to whichever
//! loopback port is its target now, so switching the target (and restarting the process it
//! left) is a backend "restarted" without a single connection refused: only its sessions are
//! gone. Connections already made stay with the port they were made to.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub struct SwitchingFront {
    address: SocketAddr,
    target: Arc<AtomicU16>,
    task: JoinHandle<()>,
}

impl SwitchingFront {
    /// Listens on a free loopback port and forwards to `target`.
    pub async fn start(target: u16) -> std::io::Result<SwitchingFront> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let target = Arc::new(AtomicU16::new(target));
        let current = target.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                let port = current.load(Ordering::SeqCst);
                tokio::spawn(async move {
                    // A target that is not listening closes the client's connection: what a
                    // backend's port would do between a crash and its restart.
                    if let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", port)).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Ok(SwitchingFront {
            address,
            target,
            task,
        })
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    pub fn target(&self) -> u16 {
        self.target.load(Ordering::SeqCst)
    }

    /// New connections go to `port` from now on.
    pub fn switch_to(&self, port: u16) {
        self.target.store(port, Ordering::SeqCst);
    }
}

impl Drop for SwitchingFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}
