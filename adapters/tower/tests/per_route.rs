//! One layer per route (docs/tower.md, "One layer per route"): each route's
//! layer decides its own units and source, and a route without one never
//! reaches the gate, with no path matching written by hand.

mod support;

use std::time::Duration;

use admit_tower::{AdmitLayer, AdmitPermit, Decision};
use axum::body::Body;
use axum::routing::{get, post};
use axum::{Extension, Router};
use http::request::Parts;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use support::{gate, Route};
use tower::ServiceExt;

/// Says what the request holds: `<source> <units>`.
async fn holds(Extension(permit): Extension<AdmitPermit<Route>>) -> String {
    use admit::Source;
    format!("{} {}", permit.source().label(), permit.units())
}

async fn get_body(app: &Router, method: &str, path: &str) -> (StatusCode, String) {
    let request = Request::builder()
        .method(method)
        .uri(path)
        .body(Body::empty())
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test(start_paused = true)]
async fn each_route_has_its_own_decision_and_an_unlayered_route_bypasses() {
    let (gate, counting) = gate(4, Duration::from_secs(5));
    let app = Router::new()
        .route(
            "/upload",
            post(holds).layer(AdmitLayer::new(gate.clone(), |_: &Parts| {
                Decision::admit(1, Route::Upload)
            })),
        )
        .route(
            "/mirror",
            post(holds).layer(AdmitLayer::new(gate.clone(), |_: &Parts| {
                Decision::admit(2, Route::Mirror)
            })),
        )
        .route("/healthz", get(|| async { "ok" }));

    assert_eq!(
        get_body(&app, "POST", "/upload").await,
        (StatusCode::OK, "upload 1".to_owned())
    );
    assert_eq!(
        get_body(&app, "POST", "/mirror").await,
        (StatusCode::OK, "mirror 2".to_owned())
    );
    assert_eq!(
        get_body(&app, "GET", "/healthz").await,
        (StatusCode::OK, "ok".to_owned())
    );
    assert_eq!(
        counting.admitted(),
        2,
        "the health check never reached the gate"
    );
    counting.in_use_becomes(0).await;
}
