//! `AsyncStdTimer` on async-std's runtime. Real time is the only clock here, so only
//! outcomes are asserted.

use std::time::Duration;

use admit::Timer;
use admit_async_std::AsyncStdTimer;
use futures_lite::future::poll_once;

#[async_std::test]
async fn sleep_until_a_past_deadline_is_ready_on_first_poll() {
    let timer = AsyncStdTimer::new();
    assert_eq!(poll_once(timer.sleep_until(Duration::ZERO)).await, Some(()));
    let now = timer.now();
    assert_eq!(poll_once(timer.sleep_until(now)).await, Some(()));
}

#[async_std::test]
async fn sleep_until_completes_no_earlier_than_the_deadline() {
    let timer = AsyncStdTimer::new();
    let deadline = Duration::from_millis(20);
    timer.sleep_until(deadline).await;
    assert!(timer.now() >= deadline, "woke at {:?}", timer.now());
}

#[async_std::test]
async fn sleeps_in_a_spawned_async_std_task() {
    let timer = AsyncStdTimer::new();
    let woke = async_std::task::spawn(async move {
        timer.sleep_until(Duration::from_millis(10)).await;
        timer.now()
    })
    .await;
    assert!(woke >= Duration::from_millis(10));
}

#[async_std::test]
async fn a_far_deadline_is_pending_and_max_does_not_panic() {
    let timer = AsyncStdTimer::new();
    assert_eq!(
        poll_once(timer.sleep_until(Duration::from_secs(3600))).await,
        None
    );
    assert_eq!(poll_once(timer.sleep_until(Duration::MAX)).await, None);
}

#[async_std::test]
async fn spawn_runs_the_task_on_async_std() {
    // What a gate with an overload target hands its timer at build: its watch.
    let (ran, told) = async_std::channel::bounded(1);
    let spawned = AsyncStdTimer::new().spawn(Box::new(async move {
        ran.send(()).await.unwrap();
    }));
    assert!(spawned, "the timer says it spawned");
    told.recv().await.expect("the task ran");
}
