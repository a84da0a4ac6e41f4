//! The unwatched warning reaches a server that logs with `log` and installs no
//! `tracing` subscriber. A test binary of its own: the logger is process-wide,
//! and no `tracing` subscriber may ever be set in this process.

mod support;

use std::convert::Infallible;
use std::sync::Mutex;
use std::time::Duration;

use admit_tower::{AdmitLayer, Decision};
use bytes::Bytes;
use http::request::Parts;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use support::{gate, Route};
use tower::{Layer, ServiceExt};

/// Keeps every warning of an `admit_tower` target.
struct Capture(Mutex<Vec<String>>);

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }
    fn log(&self, record: &log::Record<'_>) {
        if record.level() == log::Level::Warn && record.target().starts_with("admit_tower") {
            self.0.lock().unwrap().push(record.args().to_string());
        }
    }
    fn flush(&self) {}
}

static CAPTURE: Capture = Capture(Mutex::new(Vec::new()));

#[tokio::test(start_paused = true)]
async fn without_a_tracing_subscriber_the_warning_is_a_log_record() {
    log::set_logger(&CAPTURE).unwrap();
    log::set_max_level(log::LevelFilter::Warn);
    let (gate, _) = gate(2, Duration::from_secs(5));
    let layer = AdmitLayer::new(gate, |_: &Parts| Decision::admit(1, Route::Upload));
    let inner = tower::service_fn(|_: Request<admit_tower::WatchedBody<Full<Bytes>>>| async {
        Ok::<_, Infallible>(Response::new(Full::new(Bytes::new())))
    });
    let request = Request::post("/upload")
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = layer.layer(inner).oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let warnings = CAPTURE.0.lock().unwrap().clone();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("no hang-up watch"),
        "not the warning: {}",
        warnings[0]
    );
}
