//! A tower [`Layer`](tower_layer::Layer) that admits HTTP requests through an
//! [`admit`] gate: per request weighted units (or a bypass), a bounded wait instead
//! of an instant refusal, `503` + `Retry-After` on a shed, nothing counted for a
//! client that hung up, and the units held until the response body is finished.
//!
//! ```
//! use std::time::Duration;
//!
//! use admit_tower::{AdmitLayer, AdmitPermit, Decision, PeerWatch};
//! use axum::{routing::{get, post}, Extension, Router};
//!
//! admit::sources! {
//!     /// Where an upload session is opened.
//!     pub enum Route { Upload => "upload", Mirror => "mirror" }
//! }
//!
//! async fn upload(Extension(permit): Extension<AdmitPermit<Route>>, body: axum::body::Body) -> String {
//!     // Admitted before the body was touched: read it now, within a size limit.
//!     let bytes = axum::body::to_bytes(body, 8 << 20).await.map_or(0, |b| b.len());
//!     format!("stored {bytes} bytes with {} unit(s)\n", permit.units())
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let gate = admit_tokio::gate(4).max_units(2).wait_budget(Duration::from_secs(5)).build()?;
//! let app: Router = Router::new()
//!     .route("/upload", post(upload))
//!     .route("/mirror", post(upload))
//!     .route("/healthz", get(|| async { "ok\n" }))
//!     .layer(AdmitLayer::new(gate, |head: &http::request::Parts| match head.uri.path() {
//!         "/upload" => Decision::admit(1, Route::Upload),
//!         "/mirror" => Decision::admit(2, Route::Mirror),
//!         _ => Decision::Bypass, // never waits, holds nothing
//!     }));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
//! let server = axum::serve(listener, app.into_make_service_with_connect_info::<PeerWatch>());
//! # drop(server);
//! # Ok(())
//! # }
//! ```
//!
//! # Why not `ConcurrencyLimit` + `LoadShed`
//!
//! Tower's pair sheds at once instead of waiting a budget, counts requests rather
//! than weighted units, and takes its permit in `poll_ready`, which a server or a
//! `Buffer` may drive before any request exists, holding capacity for nobody. Here
//! `poll_ready` only asks the inner service and the units are taken in `call`.
//! `docs/tower.md` runs both on the same load.
//!
//! # The order: admit, then read the body
//!
//! The layer decides from the request's head ([`http::request::Parts`]) and waits
//! before the inner service, and so the handler, sees the body: a parked request
//! holds no memory for its body, and a client that sent `Expect: 100-continue` has
//! not even sent it (hyper sends `100 Continue` when the handler first reads). A
//! handler that takes the body as an extractor (`Bytes`, `Json`, `String`) reads it
//! *after* admission under this layer; without the layer, it reads it *before* the
//! handler could ask the gate, and the memory budget no longer holds. Admitted, read
//! the body with a size limit (`axum::body::to_bytes(body, limit)`, or
//! `DefaultBodyLimit`) and answer `413` past it: one unit is one session's buffer.
//!
//! # What a request gets
//!
//! | the request… | answer | counted |
//! |---|---|---|
//! | is bypassed ([`Decision::Bypass`]) | the inner service's, at once | nothing |
//! | is admitted | the inner service's; the units held until its body ends or is dropped | `wait_seconds`, `hold_seconds` |
//! | waits its budget (or [`WaitCeiling`]) out | `503` + `Retry-After` ([`default_response`], or [`AdmitLayer::on_reject`]) | a shed |
//! | asks for more than the capacity | `503`, no `Retry-After` | nothing |
//! | arrives after `gate.close()` | `503`, no `Retry-After` | nothing |
//! | hangs up while parked ([`HangUp`], `PeerWatch`) | nothing is written | nothing |
//!
//! # Features
//!
//! | Feature | Default | Explanation |
//! |---|---|---|
//! | `axum` | no | [`Rejection`] implements `axum::response::IntoResponse`, so `gate.acquire(..).await?` works in a handler; with `tokio`, `PeerWatch` is axum connect info |
//! | `tokio` | no | `PeerWatch`: notices a hang-up on a Tokio `TcpStream` hyper is not reading |
//!
//! Without features the crate is runtime-agnostic: its only clock is the gate's
//! [`Timer`](admit::Timer).
#![cfg_attr(docsrs, feature(doc_auto_cfg))]

mod body;
mod decision;
#[cfg(feature = "tokio")]
mod peer;
mod permit;
mod reject;
mod service;
mod signal;

pub use body::AdmitBody;
pub use decision::Decision;
#[cfg(feature = "tokio")]
pub use peer::{PeerWatch, PeerWatchFuture, PeerWatchLayer, PeerWatchService};
pub use permit::AdmitPermit;
pub use reject::{default_response, ClientGone, Rejection, CLIENT_CLOSED_REQUEST};
pub use service::{Admit, AdmitLayer, ResponseFuture};
pub use signal::{HangUp, WaitCeiling};

/// The error type of [`AdmitBody`] (and of `PeerWatchService`, feature `tokio`).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Every public type is `Send + Sync`, checked at compile time.
#[allow(dead_code)]
fn assert_send_sync() {
    fn check<T: Send + Sync>() {}
    admit::sources! { enum Route { R => "r" } }
    type Decide = fn(&http::request::Parts) -> Decision<Route>;
    check::<AdmitLayer<Route, Decide>>();
    check::<Admit<(), Route, Decide>>();
    check::<AdmitBody<String>>();
    check::<AdmitPermit<Route>>();
    check::<Decision<Route>>();
    check::<Rejection>();
    check::<ClientGone>();
    check::<HangUp>();
    check::<WaitCeiling>();
    #[cfg(feature = "tokio")]
    {
        check::<PeerWatch>();
        check::<PeerWatchLayer>();
        check::<PeerWatchService<()>>();
    }
}
