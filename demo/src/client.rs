//! A minimal HTTP/1.1 client over a Tokio `TcpStream`: one request per connection
//! (`Connection: close`), uploads with `Expect: 100-continue`.
//!
//! Small on purpose: the load generator needs exactly this, and clients that hang
//! up, stall or send slowly at chosen moments, which a full client library hides.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

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

/// How the server ended a request whose client stalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StallEnd {
    /// It answered with this status (`408 Request Timeout`: the progress rule
    /// cut it).
    Answered(u16),
    /// It closed or reset the connection before an answer was read.
    Closed,
}

impl StallEnd {
    /// Whether this is how a cut ends a request: `408`, or the connection
    /// closed by the server.
    #[must_use]
    pub fn is_cut(self) -> bool {
        matches!(self, Self::Answered(408) | Self::Closed)
    }
}

/// A client that stalls: `method path` announcing a body of `len` bytes (no
/// `Expect`), `first` of it sent with the headers, then (with `trickle`) one byte
/// every `trickle`, never the whole body; until the server answers or closes the
/// connection. Returns how the server ended it, and when after the request was
/// sent; `None` if `patience` passed first (the client gives up and hangs up).
///
/// # Errors
///
/// Connection errors before the request was sent.
pub async fn stall(
    addr: SocketAddr,
    method: &str,
    path: &str,
    len: usize,
    first: &[u8],
    trickle: Option<Duration>,
    patience: Duration,
) -> io::Result<Option<(Duration, StallEnd)>> {
    let stream = connect(addr).await?;
    let (mut rd, mut wr) = stream.into_split();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/octet-stream\r\n\
         content-length: {len}\r\nconnection: close\r\n\r\n"
    )
    .into_bytes();
    request.extend_from_slice(first);
    wr.write_all(&request).await?;
    let sent = Instant::now();
    let sending = async {
        if let Some(every) = trickle {
            let mut tick = tokio::time::interval_at(sent + every, every);
            // One byte short of the body: the request never completes.
            for _ in first.len()..len.saturating_sub(1) {
                tick.tick().await;
                wr.write_all(b"x").await?;
            }
        }
        std::future::pending::<io::Result<()>>().await
    };
    let mut buf = Vec::new();
    let ended = async {
        tokio::select! {
            biased;
            read = read_head(&mut rd, &mut buf) => (
                sent.elapsed(),
                read.map_or(StallEnd::Closed, |(status, _)| StallEnd::Answered(status)),
            ),
            _failed = sending => {
                // The server closed while we wrote; its answer may still be there.
                let at = sent.elapsed();
                let read = tokio::time::timeout(Duration::from_secs(1), read_head(&mut rd, &mut buf)).await;
                match read {
                    Ok(Ok((status, _))) => (at, StallEnd::Answered(status)),
                    _ => (at, StallEnd::Closed),
                }
            }
        }
    };
    Ok(tokio::time::timeout(patience, ended).await.ok())
}

/// `POST path` with `body`, a careful client on a slow link: the headers with
/// `Expect: 100-continue`, then, once the server answers `100 Continue`, the body
/// at `rate` bytes a second, an eighth of a second's bytes at a time.
///
/// # Errors
///
/// Connection or protocol errors (a write that fails is one only if no answer
/// follows it).
pub async fn post_slowly(
    addr: SocketAddr,
    path: &str,
    body: &[u8],
    rate: usize,
) -> io::Result<Response> {
    let mut stream = connect(addr).await?;
    stream
        .write_all(upload_head(addr, path, body.len()).as_bytes())
        .await?;
    let mut buf = Vec::new();
    let (mut status, mut headers) = read_head(&mut stream, &mut buf).await?;
    if status == 100 {
        let every = Duration::from_millis(125);
        let slice = (rate / 8).max(1);
        let mut tick = tokio::time::interval_at(Instant::now() + every, every);
        for part in body.chunks(slice) {
            tick.tick().await;
            if let Err(e) = stream.write_all(part).await {
                // Refused mid-way (cut?): its answer may be there to read.
                let read =
                    tokio::time::timeout(Duration::from_secs(1), read_head(&mut stream, &mut buf))
                        .await;
                let Ok(Ok((status, headers))) = read else {
                    return Err(e);
                };
                return Ok(Response {
                    status,
                    headers,
                    body: Vec::new(),
                });
            }
        }
        (status, headers) = read_head(&mut stream, &mut buf).await?;
    }
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
async fn read_head<R: AsyncRead + Unpin>(
    stream: &mut R,
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
