//! A minimal HTTP/1.1 client over a Tokio `TcpStream`: one request per connection
//! (`Connection: close`), uploads with `Expect: 100-continue`.
//!
//! Small on purpose: the load generator needs exactly this, and a client that can
//! hang up at a chosen moment, which a full client library hides.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest response head the client accepts.
const MAX_HEAD: usize = 64 << 10;

/// A response: status, headers (names lower-cased) and body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// Headers in order, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body as read up to the server's close.
    pub body: Vec<u8>,
}

impl Response {
    /// The first header named `name` (lower-case).
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `POST path` with `body`, the way a careful upload client does it: the headers
/// first with `Expect: 100-continue`, the body only once the server answers
/// `100 Continue` (that is, once the upload was admitted). A shed request gets its
/// 503 without the body ever being sent.
///
/// # Errors
///
/// Connection or protocol errors.
pub async fn post(addr: SocketAddr, path: &str, body: &[u8]) -> io::Result<Response> {
    let mut stream = connect(addr).await?;
    stream
        .write_all(upload_head(addr, path, body.len()).as_bytes())
        .await?;
    let mut buf = Vec::new();
    let (mut status, mut headers) = read_head(&mut stream, &mut buf).await?;
    if status == 100 {
        stream.write_all(body).await?;
        (status, headers) = read_head(&mut stream, &mut buf).await?;
    }
    read_body(&mut stream, buf, status, headers).await
}

/// Sends an upload's headers, waits `after` (parked, if the gate is full), then
/// drops the connection: a client that gave up. `None` then; but an answer that
/// came first (a shed at once, with `--max-waiters`) is read and returned: that
/// client was turned away before it could give up.
///
/// # Errors
///
/// Connection or protocol errors.
pub async fn post_and_hang_up(
    addr: SocketAddr,
    path: &str,
    len: usize,
    after: Duration,
) -> io::Result<Option<Response>> {
    let mut stream = connect(addr).await?;
    stream
        .write_all(upload_head(addr, path, len).as_bytes())
        .await?;
    let mut buf = Vec::new();
    let answer = tokio::time::timeout(after, async {
        loop {
            // `100 Continue` (admitted): the body is never sent; wait for `after`.
            let (status, headers) = read_head(&mut stream, &mut buf).await?;
            if status != 100 {
                return Ok::<_, io::Error>((status, headers));
            }
        }
    })
    .await;
    match answer {
        Err(_gave_up) => Ok(None),
        Ok(Ok((status, headers))) => read_body(&mut stream, buf, status, headers).await.map(Some),
        Ok(Err(e)) => Err(e),
    }
}

/// `method path` with `body` sent at once (no `Expect`): an upload session's
/// requests, whose unit its lease holds already.
///
/// # Errors
///
/// Connection or protocol errors.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: &[u8],
) -> io::Result<Response> {
    let mut stream = connect(addr).await?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/octet-stream\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body).await?;
    let mut buf = Vec::new();
    let (status, headers) = read_head(&mut stream, &mut buf).await?;
    read_body(&mut stream, buf, status, headers).await
}

/// `GET path`.
///
/// # Errors
///
/// Connection or protocol errors.
pub async fn get(addr: SocketAddr, path: &str) -> io::Result<Response> {
    let mut stream = connect(addr).await?;
    let head = format!("GET {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
    stream.write_all(head.as_bytes()).await?;
    let mut buf = Vec::new();
    let (status, headers) = read_head(&mut stream, &mut buf).await?;
    read_body(&mut stream, buf, status, headers).await
}

async fn connect(addr: SocketAddr) -> io::Result<TcpStream> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

fn upload_head(addr: SocketAddr, path: &str, len: usize) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/octet-stream\r\n\
         content-length: {len}\r\nexpect: 100-continue\r\nconnection: close\r\n\r\n"
    )
}

/// Reads one response head into `buf` and parses it; leaves in `buf` whatever
/// followed the head.
async fn read_head(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> io::Result<(u16, Vec<(String, String)>)> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let parsed = parse_head(&buf[..end]);
            buf.drain(..end + 4);
            return parsed;
        }
        if buf.len() > MAX_HEAD {
            return Err(invalid("response head too long"));
        }
        let mut chunk = [0; 4096];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed before a response",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

fn parse_head(head: &[u8]) -> io::Result<(u16, Vec<(String, String)>)> {
    let head = std::str::from_utf8(head).map_err(|_| invalid("response head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split_whitespace().nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| invalid("no status line"))?;
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    Ok((status, headers))
}

/// Reads the body up to the server's close (`Connection: close`), checking it
/// against `content-length` when there is one.
async fn read_body(
    stream: &mut TcpStream,
    mut body: Vec<u8>,
    status: u16,
    headers: Vec<(String, String)>,
) -> io::Result<Response> {
    // A reset after a complete response is not an error of the response.
    let read = stream.read_to_end(&mut body).await;
    let response = Response {
        status,
        headers,
        body,
    };
    match response
        .header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        Some(len) if response.body.len() >= len => {
            let mut response = response;
            response.body.truncate(len);
            Ok(response)
        }
        Some(_) => Err(read
            .err()
            .unwrap_or_else(|| invalid("response body cut short"))),
        None => read.map(|_| response),
    }
}

fn invalid(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_owned())
}
