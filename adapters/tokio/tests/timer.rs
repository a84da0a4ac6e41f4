//! `TokioTimer` on Tokio's paused clock: `now` and `sleep_until` follow virtual time.

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::task::Poll;
use std::time::Duration;

use admit::Timer;
use admit_tokio::TokioTimer;

/// Polls `f` once, without waiting.
async fn poll_once<F: Future>(f: Pin<&mut F>) -> Poll<F::Output> {
    let mut f = Some(f);
    poll_fn(|cx| Poll::Ready(f.take().unwrap().poll(cx))).await
}

#[tokio::test(start_paused = true)]
async fn now_counts_virtual_time_from_construction() {
    tokio::time::advance(Duration::from_secs(7)).await; // before the origin: not counted
    let timer = TokioTimer::new();
    assert_eq!(timer.now(), Duration::ZERO);
    tokio::time::advance(Duration::from_millis(2500)).await;
    assert_eq!(timer.now(), Duration::from_millis(2500));
}

#[tokio::test(start_paused = true)]
async fn sleep_until_completes_at_the_deadline_not_before() {
    let timer = TokioTimer::new();
    let mut sleep = pin!(timer.sleep_until(Duration::from_secs(5)));
    assert!(poll_once(sleep.as_mut()).await.is_pending());
    tokio::time::advance(Duration::from_millis(4999)).await;
    assert!(poll_once(sleep.as_mut()).await.is_pending());
    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(poll_once(sleep.as_mut()).await.is_ready());
    assert_eq!(timer.now(), Duration::from_secs(5));
}

#[tokio::test(start_paused = true)]
async fn awaited_sleep_auto_advances_exactly_to_the_deadline() {
    let timer = TokioTimer::new();
    timer.sleep_until(Duration::from_millis(1234)).await;
    assert_eq!(timer.now(), Duration::from_millis(1234));
}

#[tokio::test(start_paused = true)]
async fn sleep_until_a_past_deadline_is_ready_at_once() {
    let timer = TokioTimer::new();
    tokio::time::advance(Duration::from_secs(3)).await;
    let sleep = pin!(timer.sleep_until(Duration::from_secs(1)));
    assert!(poll_once(sleep).await.is_ready());
    let sleep = pin!(timer.sleep_until(timer.now()));
    assert!(poll_once(sleep).await.is_ready());
    assert_eq!(timer.now(), Duration::from_secs(3));
}

#[tokio::test(start_paused = true)]
async fn deadline_counts_from_the_origin_not_from_the_call() {
    let timer = TokioTimer::new();
    tokio::time::advance(Duration::from_secs(2)).await;
    // Deadline 5s after the origin is 3s from now, not 5s.
    let mut sleep = pin!(timer.sleep_until(Duration::from_secs(5)));
    tokio::time::advance(Duration::from_millis(2999)).await;
    assert!(poll_once(sleep.as_mut()).await.is_pending());
    tokio::time::advance(Duration::from_millis(1)).await;
    assert!(poll_once(sleep.as_mut()).await.is_ready());
}

#[tokio::test(start_paused = true)]
async fn an_unrepresentable_deadline_does_not_panic_and_stays_pending() {
    let timer = TokioTimer::new();
    let mut sleep = pin!(timer.sleep_until(Duration::MAX));
    assert!(poll_once(sleep.as_mut()).await.is_pending());
    let year = Duration::from_secs(365 * 24 * 3600);
    tokio::time::advance(year).await;
    assert!(poll_once(sleep.as_mut()).await.is_pending());
    assert_eq!(timer.now(), year);
}
