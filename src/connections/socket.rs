//! A connection's client socket as the listener watches it: its first bytes (which protocol,
//! when the first byte came), every read of an idle connection (a next request begun), every
//! write (progress, or a client that accepts nothing), the kernel's queues behind it, and its
//! lingering close.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::{ConnectionState, Registered, millis_between};

/// A lingering close reads what the client still sends for at most this long in all...
const LINGER_TOTAL: Duration = Duration::from_secs(5);
/// ... and gives up after this long without a byte.
const LINGER_SILENCE: Duration = Duration::from_secs(1);

/// What an HTTP/2 client sends first; anything else is HTTP/1 (the auto server's own rule).
const HTTP2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// A client socket's two kernel queues: the bytes written to it that the client has not yet
/// acknowledged (Linux's `TIOCOUTQ`), and the bytes it sent that are not yet read
/// (`FIONREAD`). Elsewhere unknown: a waiting write counts as the client taking nothing.
pub(super) struct SocketQueues {
    /// The socket's descriptor; -1 until watched and once the socket is let go.
    fd: std::sync::atomic::AtomicI32,
}

impl Default for SocketQueues {
    fn default() -> Self {
        SocketQueues {
            fd: std::sync::atomic::AtomicI32::new(-1),
        }
    }
}

impl SocketQueues {
    /// Forgets the socket, before it is closed (its number may then name another).
    pub(super) fn unwatch(&self) {
        self.fd.store(-1, Ordering::Release);
    }

    pub(super) fn watch(&self, stream: &TcpStream) {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            self.fd.store(stream.as_raw_fd(), Ordering::Release);
        }
        #[cfg(not(target_os = "linux"))]
        let _ = stream;
    }

    /// Bytes written and not yet acknowledged by the client.
    pub(super) fn queued(&self) -> Option<u64> {
        #[cfg(target_os = "linux")]
        return self.ask(libc::TIOCOUTQ);
        #[cfg(not(target_os = "linux"))]
        None
    }

    /// Bytes the client sent that the connection has not read yet.
    pub(super) fn unread(&self) -> Option<u64> {
        #[cfg(target_os = "linux")]
        return self.ask(libc::FIONREAD);
        #[cfg(not(target_os = "linux"))]
        None
    }

    #[cfg(target_os = "linux")]
    fn ask(&self, request: libc::Ioctl) -> Option<u64> {
        let fd = self.fd.load(Ordering::Acquire);
        if fd < 0 {
            return None;
        }
        let mut count: libc::c_int = 0;
        // SAFETY: `fd` is the connection's own socket, open for as long as its state is asked
        // (the connection, which owns the socket, is dropped after the last ask), and TIOCOUTQ
        // and FIONREAD each write one c_int to the pointer they are given.
        let done = unsafe { libc::ioctl(fd, request, &mut count) };
        (done == 0).then(|| u64::try_from(count).unwrap_or(0))
    }
}

/// The client's socket, noting its first byte for the first-byte deadline and whether it
/// speaks HTTP/1, whose heads have a deadline of their own.
pub struct WatchedStream {
    /// `None` only once dropped, when a lingering close takes it.
    inner: Option<TcpStream>,
    state: Arc<ConnectionState>,
    /// How many of the first bytes matched HTTP/2's preface; `None` once the protocol is known.
    preface_matched: Option<usize>,
}

impl WatchedStream {
    pub fn new(inner: TcpStream, registered: &Registered) -> Self {
        registered.state().queues.watch(&inner);
        WatchedStream {
            inner: Some(inner),
            state: registered.state().clone(),
            preface_matched: Some(0),
        }
    }

    /// Reads the protocol from the connection's first bytes, `read` being the latest of them.
    fn learn_protocol(&mut self, read: &[u8]) {
        let Some(matched) = self.preface_matched else {
            return;
        };
        let expected = &HTTP2_PREFACE[matched..];
        let compared = read.len().min(expected.len());
        if read[..compared] != expected[..compared] {
            self.preface_matched = None;
            self.state.http1.store(true, Ordering::Release);
            // The head's deadline may be nearer than the one the task sleeps until.
            self.state.look_again.store(true, Ordering::Release);
        } else if matched + compared == HTTP2_PREFACE.len() {
            self.preface_matched = None;
        } else {
            self.preface_matched = Some(matched + compared);
        }
    }
}

impl AsyncRead for WatchedStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let Some(inner) = this.inner.as_mut() else {
            return Poll::Ready(Err(io::ErrorKind::NotConnected.into()));
        };
        let polled = Pin::new(inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            this.state.note_read();
        }
        if buf.filled().len() > before && this.preface_matched.is_some() {
            if !this.state.first_byte_seen.load(Ordering::Relaxed) {
                let at = millis_between(this.state.epoch, Instant::now());
                this.state.first_byte_at.store(at, Ordering::Release);
                this.state.first_byte_seen.store(true, Ordering::Release);
            }
            this.learn_protocol(&buf.filled()[before..]);
        }
        polled
    }
}

impl WatchedStream {
    /// Runs one write on the socket and notes what it did for the write deadline and for
    /// idleness.
    fn watched_write(
        &mut self,
        write: impl FnOnce(Pin<&mut TcpStream>) -> Poll<io::Result<usize>>,
    ) -> Poll<io::Result<usize>> {
        let Some(inner) = self.inner.as_mut() else {
            return not_connected();
        };
        let polled = write(Pin::new(inner));
        match &polled {
            Poll::Pending => self.state.note_write_blocked(),
            Poll::Ready(Ok(written)) if *written > 0 => self.state.note_write_progress(),
            Poll::Ready(_) => {}
        }
        polled
    }
}

fn not_connected<T>() -> Poll<io::Result<T>> {
    Poll::Ready(Err(io::ErrorKind::NotConnected.into()))
}

impl AsyncWrite for WatchedStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .watched_write(|inner| inner.poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut()
            .watched_write(|inner| inner.poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        self.inner
            .as_ref()
            .is_some_and(TcpStream::is_write_vectored)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().inner.as_mut() {
            Some(inner) => Pin::new(inner).poll_flush(cx),
            None => not_connected(),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut().inner.as_mut() {
            Some(inner) => Pin::new(inner).poll_shutdown(cx),
            None => not_connected(),
        }
    }
}

impl Drop for WatchedStream {
    /// A connection hyper ended closes lingering: a client may still be sending a body that
    /// an early answer (413, 401, 403) left unread, and closing a socket with unread bytes
    /// resets it, losing the answer the client has not read yet. One cut by a deadline (a
    /// slowloris, a stalled reader, a reclaimed socket) is closed at once.
    fn drop(&mut self) {
        self.state.queues.unwatch();
        let Some(stream) = self.inner.take() else {
            return;
        };
        if self.state.cut.load(Ordering::Acquire) {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(linger(stream));
        }
    }
}

/// nginx's lingering close: the write half shut (the answer is all sent), then what the client
/// still sends read and dropped until it closes, falls silent, or [`LINGER_TOTAL`] is over.
async fn linger(mut stream: TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    if stream.shutdown().await.is_err() {
        return;
    }
    let give_up = Instant::now() + LINGER_TOTAL;
    let mut discarded = [0u8; 16 * 1024];
    loop {
        let silence_over = (Instant::now() + LINGER_SILENCE).min(give_up);
        match tokio::time::timeout_at(silence_over, stream.read(&mut discarded)).await {
            Ok(Ok(read)) if read > 0 => {}
            _ => return,
        }
    }
}
