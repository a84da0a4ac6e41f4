#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod body;
mod decision;
#[cfg(feature = "tokio")]
mod peer;
mod permit;
pub mod progress;
mod reject;
mod service;
mod signal;
mod watched;

pub use body::AdmitBody;
pub use decision::Decision;
#[cfg(feature = "tokio")]
pub use peer::{PeerWatch, PeerWatchFuture, PeerWatchLayer, PeerWatchService};
pub use permit::AdmitPermit;
pub use progress::{BodyCut, ProgressRule};
pub use reject::{default_response, ClientGone, Rejection, CLIENT_CLOSED_REQUEST};
pub use service::{Admit, AdmitLayer, ResponseFuture};
pub use signal::{HangUp, WaitCeiling};
pub use watched::WatchedBody;

/// The error type of [`AdmitBody`] (and of `PeerWatchService`, feature `tokio`).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

// Every public type is `Send + Sync`, checked at compile time, except the response
// future, which is `Send` only: it boxes the acquire, and with it the `HangUp`
// future, which need only be `Send` (a future is polled through `&mut`, so nothing
// needs it `Sync`).
const _: fn() = || {
    use std::convert::Infallible;
    use std::future::Ready;
    use std::task::{Context, Poll};

    use http::{Request, Response};

    fn check<T: Send + Sync>() {}
    fn check_send<T: Send>() {}

    admit::sources! { enum Route { R => "r" } }
    type Decide = fn(&http::request::Parts) -> Decision<Route>;

    #[derive(Clone)]
    struct Svc;
    impl tower_service::Service<Request<WatchedBody<String>>> for Svc {
        type Response = Response<String>;
        type Error = Infallible;
        type Future = Ready<Result<Response<String>, Infallible>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: Request<WatchedBody<String>>) -> Self::Future {
            std::future::ready(Ok(Response::new(String::new())))
        }
    }

    check::<AdmitLayer<Route, Decide>>();
    check::<Admit<Svc, Route, Decide>>();
    check_send::<ResponseFuture<Svc, String, Route, Decide>>();
    check::<AdmitBody<String>>();
    check::<BodyCut>();
    check::<ProgressRule>();
    check_send::<WatchedBody<String>>();
    check::<AdmitPermit<Route>>();
    check::<Decision<Route>>();
    check::<Rejection>();
    check::<ClientGone>();
    check::<HangUp>();
    check::<WaitCeiling>();
    check::<BoxError>();
    #[cfg(feature = "tokio")]
    {
        check::<PeerWatch>();
        check::<PeerWatchLayer>();
        check::<PeerWatchService<Svc>>();
        check::<PeerWatchFuture<Ready<Result<Response<String>, Infallible>>>>();
    }
};
