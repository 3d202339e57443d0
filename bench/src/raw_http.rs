//! Raw HTTP/1.1 for the soak's clients that must decide how fast they read: a socket with a
//! small receive buffer (so a slow reader really holds the gateway's writes back), reading a
//! whole answer at a pace until the connection ends, and parsing what was read (head, framing,
//! de-chunked body, and whether the body is whole by its own framing).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::Instant;

/// Connects with the socket's receive buffer set to `receive_buffer` bytes (the kernel doubles
/// it), so what the client does not read stays in the gateway's socket.
pub async fn connect_with_receive_buffer(
    address: SocketAddr,
    receive_buffer: u32,
) -> std::io::Result<TcpStream> {
    let socket = match address {
        SocketAddr::V4(_) => TcpSocket::new_v4()?,
        SocketAddr::V6(_) => TcpSocket::new_v6()?,
    };
    socket.set_recv_buffer_size(receive_buffer)?;
    socket.connect(address).await
}

/// How reading a connection to its end ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The peer closed it (FIN).
    Closed,
    /// A read failed (a reset, mostly).
    Failed(String),
    /// `deadline` came first.
    Deadline,
}

/// Reads until the connection ends or `deadline`, at most `piece` bytes a read, sleeping
/// `pause()` after each read that got bytes.
pub async fn read_paced(
    socket: &mut TcpStream,
    piece: usize,
    mut pause: impl FnMut() -> Duration,
    deadline: Instant,
) -> (Vec<u8>, Ending) {
    let mut bytes = Vec::new();
    let mut buffer = vec![0u8; piece.max(1)];
    loop {
        match tokio::time::timeout_at(deadline, socket.read(&mut buffer)).await {
            Err(_) => return (bytes, Ending::Deadline),
            Ok(Ok(0)) => return (bytes, Ending::Closed),
            Ok(Err(error)) => return (bytes, Ending::Failed(error.to_string())),
            Ok(Ok(read)) => bytes.extend_from_slice(&buffer[..read]),
        }
        let wait = pause();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

/// One answer as read off a connection to its end.
#[derive(Debug)]
pub struct RawAnswer {
    pub status: u16,
    /// Names in lowercase.
    pub headers: Vec<(String, String)>,
    /// De-chunked when the answer was chunked.
    pub body: Vec<u8>,
    /// Whether the body is all its framing announced: as long as its `content-length`, or its
    /// last chunk read. Without either it is whatever came before the connection ended.
    pub whole: bool,
    /// Bytes read after the body (a whole body followed by anything is a desync).
    pub trailing: usize,
}

impl RawAnswer {
    /// The first header called `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(header, _)| header == name)
            .map(|(_, value)| value.as_str())
    }
}

/// Parses `bytes`, one answer read to the connection's end. `Err` when there is no whole head.
pub fn parse(bytes: &[u8]) -> Result<RawAnswer, String> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    let head_length = match response.parse(bytes) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => {
            return Err(format!("no whole answer head in {} bytes", bytes.len()));
        }
        Err(error) => return Err(format!("not an HTTP answer head: {error}")),
    };
    let status = response.code.unwrap_or_default();
    let headers: Vec<(String, String)> = response
        .headers
        .iter()
        .map(|header| {
            (
                header.name.to_ascii_lowercase(),
                String::from_utf8_lossy(header.value).trim().to_owned(),
            )
        })
        .collect();
    let rest = &bytes[head_length..];
    let find = |name: &str| {
        headers
            .iter()
            .find(|(header, _)| header == name)
            .map(|(_, value)| value.to_ascii_lowercase())
    };
    let (body, whole, trailing) = if find("transfer-encoding").as_deref() == Some("chunked") {
        dechunk(rest)
    } else if let Some(length) = find("content-length") {
        let length: usize = length
            .parse()
            .map_err(|_| format!("content-length {length:?}"))?;
        let body = rest[..rest.len().min(length)].to_vec();
        let whole = body.len() == length;
        (body, whole, rest.len().saturating_sub(length))
    } else {
        (rest.to_vec(), true, 0)
    };
    Ok(RawAnswer {
        status,
        headers,
        body,
        whole,
        trailing,
    })
}

/// The data of the chunks in `bytes`, whether the last (empty) chunk and its trailers ended
/// them, and how many bytes followed.
fn dechunk(mut bytes: &[u8]) -> (Vec<u8>, bool, usize) {
    let mut body = Vec::new();
    loop {
        let Some(end) = bytes.windows(2).position(|pair| pair == b"\r\n") else {
            return (body, false, 0);
        };
        let line = String::from_utf8_lossy(&bytes[..end]);
        let size_text = line.split(';').next().unwrap_or_default().trim();
        let Ok(size) = usize::from_str_radix(size_text, 16) else {
            return (body, false, 0);
        };
        bytes = &bytes[end + 2..];
        if size == 0 {
            // Trailers, up to the empty line.
            loop {
                let Some(end) = bytes.windows(2).position(|pair| pair == b"\r\n") else {
                    return (body, false, 0);
                };
                bytes = &bytes[end + 2..];
                if end == 0 {
                    return (body, true, bytes.len());
                }
            }
        }
        if bytes.len() < size + 2 {
            body.extend_from_slice(&bytes[..bytes.len().min(size)]);
            return (body, false, 0);
        }
        body.extend_from_slice(&bytes[..size]);
        bytes = &bytes[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_whole_by_its_own_framing() {
        let length = parse(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello").expect("parses");
        assert!(length.whole && length.body == b"hello" && length.trailing == 0);
        let short = parse(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\nhello").expect("parses");
        assert!(!short.whole);
        let chunked = parse(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n",
        )
        .expect("parses");
        assert!(chunked.whole && chunked.body == b"hello", "{chunked:?}");
        let cut = parse(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nhel\r\n2\r\nl")
            .expect("parses");
        assert!(!cut.whole && cut.body == b"hell");
        assert!(parse(b"HTTP/1.1 200 OK\r\ncontent-le").is_err());
    }
}
