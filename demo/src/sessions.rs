//! OCI-style upload sessions that span requests, on [`admit::Leases`].
//!
//! `POST /v2/uploads` waits for one unit at the gate like any upload (the layer
//! admits it), takes the permit from the layer and leases it, with the session's
//! staging buffer, under a fresh unguessable id: `202` and
//! `Location: /v2/uploads/<id>`. The session's later requests bypass the gate (its
//! lease holds its unit): `PATCH` appends a chunk, `PUT ?digest=` checks the digest
//! and finishes it, `DELETE` cancels it, and one left idle past the idle limit
//! expires with no request arriving (`admit_tokio::leases` drives the expiry). A
//! request for a session that is gone gets `404 BLOB_UPLOAD_UNKNOWN`, saying whether
//! it expired (or how else it ended) or was never known.
//!
//! However a session ends, its buffer is freed *before* its unit returns. The demo
//! checks that order for every session, with a probe that would see it reversed:
//! a session's [`Drop`] frees its buffer and then marks, on its thread, the session
//! freed; the lease's end runs on that same thread, and the observer, hearing the
//! unit of a session return (`SessionLedger::units_returned`), takes the mark. A
//! unit returned with no mark to take came back while its buffer still existed.

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{BuildHasher, RandomState};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use admit::{LeaseEnd, LeaseEndEvent, LeaseError};
use admit_tower::AdmitPermit;
use axum::body::Body;
use axum::extract::{Extension, Path, State};
use axum::http::header::{CONTENT_TYPE, LOCATION};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use http_body_util::BodyExt;

use crate::server::{App, DemoObserver, Route};

/// The path a `POST` opens a session at.
pub const UPLOADS: &str = "/v2/uploads";

/// A session's path, as routed (`/v2/uploads/<id>`).
pub const UPLOAD: &str = "/v2/uploads/{id}";

/// The lease table of the upload sessions: by id, each session's buffer and unit.
pub type SessionLeases = admit_tokio::Leases<u128, Session, Route, DemoObserver>;

/// The ways a lease ends, counted apart: [`LeaseEnd::ALL`].
pub const HOWS: usize = LeaseEnd::ALL.len();

/// `how`'s position in [`LeaseEnd::ALL`].
#[must_use]
pub fn how_index(how: LeaseEnd) -> usize {
    LeaseEnd::ALL
        .iter()
        .position(|&h| h == how)
        .unwrap_or(HOWS - 1)
}

/// A session's path: `/v2/uploads/<32 hex digits>`.
#[must_use]
pub fn location(id: u128) -> String {
    format!("{UPLOADS}/{id:032x}")
}

thread_local! {
    /// The session whose buffer this thread freed last, until the observer hears
    /// its unit return.
    static FREED: Cell<Option<u128>> = const { Cell::new(None) };
}

/// An upload session's value in the lease table: its staging buffer.
#[derive(Debug)]
pub struct Session {
    id: u128,
    buffer: Vec<u8>,
}

impl Session {
    /// The bytes staged so far.
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        &self.buffer
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // The buffer first, then the mark: the mark says "freed".
        drop(std::mem::take(&mut self.buffer));
        FREED.with(|freed| freed.set(Some(self.id)));
    }
}

/// Mints session ids: a counter through SipHash with a key drawn at random when
/// the server starts (`RandomState`), so an id tells nothing of the others.
#[derive(Debug, Default)]
pub struct IdMinter {
    key: RandomState,
    next: AtomicU64,
}

impl IdMinter {
    /// A fresh id, 128 bits.
    pub fn mint(&self) -> u128 {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let hi = self.key.hash_one((n, 0_u8));
        let lo = self.key.hash_one((n, 1_u8));
        (u128::from(hi) << 64) | u128::from(lo)
    }
}

/// The upload sessions as the server saw them: opened, ended (by id and by how),
/// and whether each one's buffer was gone when its unit returned.
#[derive(Debug, Default)]
pub struct SessionLedger {
    /// Sessions opened, with the ends heard for each.
    ends: Mutex<HashMap<u128, Vec<LeaseEnd>>>,
    /// Leases ended with no session freed just before on the same thread.
    unidentified: AtomicUsize,
    /// Lease ends per how ([`LeaseEnd::ALL`] order).
    by_how: [AtomicUsize; HOWS],
    /// Units × nanoseconds held, per how.
    unit_nanos: [AtomicU64; HOWS],
    /// A session's unit returned after its buffer was freed.
    freed_first: AtomicUsize,
    /// A session's unit returned while its buffer still existed.
    returned_unfreed: AtomicUsize,
}

impl SessionLedger {
    fn opened(&self, id: u128) {
        self.lock().insert(id, Vec::new());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u128, Vec<LeaseEnd>>> {
        self.ends.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The observer heard a lease end: counted per how, and for the session
    /// whose buffer this thread just freed.
    pub(crate) fn ended(&self, event: &LeaseEndEvent) {
        let i = how_index(event.how);
        self.by_how[i].fetch_add(1, Ordering::Relaxed);
        let unit_nanos = event.held.as_nanos().saturating_mul(event.units as u128);
        self.unit_nanos[i].fetch_add(
            u64::try_from(unit_nanos).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        match FREED.with(Cell::get) {
            Some(id) => self.lock().entry(id).or_default().push(event.how),
            None => {
                self.unidentified.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// The observer heard a session's unit return: after its buffer was freed
    /// (on this thread, just before) or not.
    pub(crate) fn units_returned(&self) {
        let counter = match FREED.with(Cell::take) {
            Some(_) => &self.freed_first,
            None => &self.returned_unfreed,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The counts so far.
    #[must_use]
    pub fn counts(&self) -> SessionEnds {
        let n = |c: &AtomicUsize| c.load(Ordering::Relaxed);
        let ends = self.lock();
        let mut counts = SessionEnds {
            opened: ends.len(),
            ended: self.by_how.each_ref().map(n),
            unit_seconds: self
                .unit_nanos
                .each_ref()
                .map(|c| Duration::from_nanos(c.load(Ordering::Relaxed)).as_secs_f64()),
            unidentified: n(&self.unidentified),
            freed_first: n(&self.freed_first),
            returned_unfreed: n(&self.returned_unfreed),
            ..SessionEnds::default()
        };
        for heard in ends.values() {
            match heard.len() {
                0 => counts.not_ended += 1,
                1 => counts.ended_once += 1,
                _ => counts.ended_more_than_once += 1,
            }
        }
        counts
    }
}

/// The upload sessions' ends, as the server's observer heard them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionEnds {
    /// Sessions opened (leased).
    pub opened: usize,
    /// Lease ends per how, in [`LeaseEnd::ALL`] order.
    pub ended: [usize; HOWS],
    /// Unit-seconds held per how: the sum of `held × units` of those leases.
    pub unit_seconds: [f64; HOWS],
    /// Sessions ended exactly once.
    pub ended_once: usize,
    /// Sessions ended more than once (none expected).
    pub ended_more_than_once: usize,
    /// Sessions opened but not ended (none expected at the end).
    pub not_ended: usize,
    /// Lease ends heard with no session's buffer freed just before (none
    /// expected).
    pub unidentified: usize,
    /// Units of a session returned after its buffer was freed.
    pub freed_first: usize,
    /// Units of a session returned while its buffer still existed (none
    /// expected).
    pub returned_unfreed: usize,
    /// Sessions still live once the load was over and every idle session had
    /// had its idle limit to expire (before the drain).
    pub live_after_idle: usize,
    /// Units the sessions held then.
    pub units_after_idle: usize,
}

impl SessionEnds {
    /// Lease ends ended `how`.
    #[must_use]
    pub fn ended(&self, how: LeaseEnd) -> usize {
        self.ended[how_index(how)]
    }

    /// Unit-seconds held by the leases that ended `how`.
    #[must_use]
    pub fn unit_seconds(&self, how: LeaseEnd) -> f64 {
        self.unit_seconds[how_index(how)]
    }

    /// Lease ends, every how.
    #[must_use]
    pub fn ended_total(&self) -> usize {
        self.ended.iter().sum()
    }
}

/// The digest a `PUT` names, of the whole upload: FNV-1a, 64 bits
/// (`fnv1a64:<16 hex digits>`); a registry would use `sha256:`, which the demo
/// does without for want of a hashing crate.
#[must_use]
pub fn digest(bytes: &[u8]) -> String {
    let hash = bytes.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("fnv1a64:{hash:016x}")
}

/// An OCI error body: `{"errors":[{"code":…,"message":…}]}`.
fn oci_error(status: StatusCode, code: &str, message: &str) -> Response {
    (
        status,
        [(CONTENT_TYPE, "application/json")],
        format!("{{\"errors\":[{{\"code\":\"{code}\",\"message\":\"{message}\"}}]}}\n"),
    )
        .into_response()
}

/// The answer to a request for a session it cannot have.
fn refused(error: LeaseError, idle_limit: Duration) -> Response {
    match error {
        LeaseError::InUse => oci_error(
            StatusCode::CONFLICT,
            "BLOB_UPLOAD_INVALID",
            "upload session in use: another request is working on it",
        ),
        LeaseError::Ended(LeaseEnd::Expired) => oci_error(
            StatusCode::NOT_FOUND,
            "BLOB_UPLOAD_UNKNOWN",
            &format!(
                "upload session expired: idle longer than {}",
                crate::secs(idle_limit)
            ),
        ),
        LeaseError::Ended(how) => oci_error(
            StatusCode::NOT_FOUND,
            "BLOB_UPLOAD_UNKNOWN",
            &format!("upload session {}", how.label()),
        ),
        _ => oci_error(
            StatusCode::NOT_FOUND,
            "BLOB_UPLOAD_UNKNOWN",
            "upload session unknown",
        ),
    }
}

/// A session as the lease table has it, checked out by a request.
type Checkout = admit::Lease<u128, Session, Route, admit_tokio::TokioTimer, DemoObserver>;

/// The session under `id` (hex, as minted), checked out for this request.
fn checkout(app: &App, id: &str) -> Result<Checkout, LeaseError> {
    let id = (id.len() == 32)
        .then(|| u128::from_str_radix(id, 16).ok())
        .flatten()
        .ok_or(LeaseError::Unknown)?;
    app.sessions.checkout(&id)
}

/// Why a chunk was not appended: the answer's status, OCI code and message.
type BadChunk = (StatusCode, &'static str, &'static str);

/// Appends `body` to `buffer`, at most `limit` bytes in all; on an error, the
/// buffer is as it was.
async fn append_body(buffer: &mut Vec<u8>, mut body: Body, limit: usize) -> Result<(), BadChunk> {
    let start = buffer.len();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            buffer.truncate(start);
            return Err((
                StatusCode::BAD_REQUEST,
                "BLOB_UPLOAD_INVALID",
                "chunk incomplete",
            ));
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        if buffer.len() + data.len() > limit {
            buffer.truncate(start);
            return Err((
                StatusCode::PAYLOAD_TOO_LARGE,
                "SIZE_INVALID",
                "upload larger than a session buffer",
            ));
        }
        buffer.extend_from_slice(&data);
    }
    Ok(())
}

fn accepted(id: u128, len: usize) -> Response {
    (
        StatusCode::ACCEPTED,
        [
            (LOCATION.as_str(), location(id)),
            ("docker-upload-uuid", format!("{id:032x}")),
            ("range", format!("0-{}", len.saturating_sub(1))),
        ],
    )
        .into_response()
}

/// `POST /v2/uploads`, once admitted: the permit taken from the layer and leased
/// with a fresh staging buffer under a fresh id.
pub async fn open(
    State(app): State<Arc<App>>,
    Extension(permit): Extension<AdmitPermit<Route>>,
) -> Response {
    let Some(permit) = permit.take() else {
        return oci_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "UNSUPPORTED",
            "the permit was gone",
        );
    };
    let id = app.ids.mint();
    let session = Session {
        id,
        buffer: Vec::with_capacity(app.session_buffer),
    };
    app.stats.sessions.opened(id);
    if let Err((permit, session)) = app.sessions.insert(id, permit, session) {
        drop(session);
        drop(permit);
        return oci_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "UNSUPPORTED",
            "session id taken",
        );
    }
    accepted(id, 0)
}

/// The session under `id` checked out, with `body` appended to its buffer; or
/// the answer that refuses the request.
async fn with_chunk(app: &App, id: &str, body: Body) -> Result<Checkout, Response> {
    let mut session = checkout(app, id).map_err(|e| refused(e, app.sessions.idle_limit()))?;
    append_body(&mut session.buffer, body, app.session_buffer)
        .await
        .map_err(|(status, code, message)| oci_error(status, code, message))?;
    Ok(session)
}

/// `PATCH /v2/uploads/<id>`: the chunk appended to the session's buffer, bounded by
/// a session buffer; the session idle again from the answer on.
pub async fn append(State(app): State<Arc<App>>, Path(id): Path<String>, body: Body) -> Response {
    let session = match with_chunk(&app, &id, body).await {
        Ok(session) => session,
        Err(answer) => return answer,
    };
    let (id, len) = (session.id, session.buffer.len());
    drop(session);
    accepted(id, len)
}

/// `PUT /v2/uploads/<id>?digest=…`: the last chunk (if any) appended, the digest
/// checked, and the session finished: its buffer freed, then its unit returned.
pub async fn close(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
    uri: Uri,
    body: Body,
) -> Response {
    let Some(wanted) = uri.query().and_then(|q| {
        q.split('&')
            .find_map(|pair| pair.strip_prefix("digest="))
            .map(|d| d.replace("%3A", ":").replace("%3a", ":"))
    }) else {
        return oci_error(StatusCode::BAD_REQUEST, "DIGEST_INVALID", "no digest");
    };
    let session = match with_chunk(&app, &id, body).await {
        Ok(session) => session,
        Err(answer) => return answer,
    };
    if digest(&session.buffer) != wanted {
        return oci_error(
            StatusCode::BAD_REQUEST,
            "DIGEST_INVALID",
            "digest does not match the upload",
        );
    }
    session.finish();
    (
        StatusCode::CREATED,
        [
            (LOCATION.as_str(), format!("/v2/blobs/{wanted}")),
            ("docker-content-digest", wanted),
        ],
    )
        .into_response()
}

/// `DELETE /v2/uploads/<id>`: the session cancelled, its buffer freed, then its
/// unit returned.
pub async fn cancel(State(app): State<Arc<App>>, Path(id): Path<String>) -> Response {
    match checkout(&app, &id) {
        Ok(session) => {
            session.cancel();
            StatusCode::NO_CONTENT.into_response()
        }
        Err(e) => refused(e, app.sessions.idle_limit()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The probe of the order sees a unit returned before its session's buffer
    /// was freed: it is not a check that always holds.
    #[test]
    fn the_order_probe_sees_a_unit_returned_before_its_buffer() {
        let ledger = SessionLedger::default();
        // In order: the buffer freed, then the unit returned.
        drop(Session {
            id: 7,
            buffer: vec![1, 2, 3],
        });
        ledger.units_returned();
        // Reversed: the unit returned, then the buffer freed.
        ledger.units_returned();
        drop(Session {
            id: 8,
            buffer: Vec::new(),
        });
        let counts = ledger.counts();
        assert_eq!((counts.freed_first, counts.returned_unfreed), (1, 1));
        FREED.with(Cell::take); // session 8's mark, never taken
    }

    #[test]
    fn ids_differ_and_digests_are_fnv1a() {
        let ids = IdMinter::default();
        let (a, b) = (ids.mint(), ids.mint());
        assert_ne!(a, b);
        assert_ne!(a >> 64, b >> 64);
        assert_eq!(location(0xab), format!("/v2/uploads/{}ab", "0".repeat(30)));
        assert_eq!(digest(b""), "fnv1a64:cbf29ce484222325");
        assert_eq!(digest(b"a"), "fnv1a64:af63dc4c8601ec8c");
    }
}
