//! `SmolTimer` on smol: past deadlines are immediate, future ones complete no earlier
//! than the deadline. Real time is the only clock here, so only outcomes are asserted.

use std::time::{Duration, Instant};

use admit::Timer;
use admit_smol::SmolTimer;
use futures_lite::future::poll_once;

#[test]
fn sleep_until_a_past_deadline_is_ready_on_first_poll() {
    smol::block_on(async {
        let timer = SmolTimer::new();
        assert_eq!(poll_once(timer.sleep_until(Duration::ZERO)).await, Some(()));
        let now = timer.now();
        assert_eq!(poll_once(timer.sleep_until(now)).await, Some(()));
    });
}

#[test]
fn sleep_until_completes_no_earlier_than_the_deadline() {
    smol::block_on(async {
        let timer = SmolTimer::new();
        let deadline = Duration::from_millis(20);
        timer.sleep_until(deadline).await;
        assert!(timer.now() >= deadline, "woke at {:?}", timer.now());
    });
}

#[test]
fn deadline_counts_from_the_origin() {
    smol::block_on(async {
        let origin = Instant::now();
        let timer = SmolTimer::with_origin(origin);
        let deadline = Duration::from_millis(15);
        timer.sleep_until(deadline).await;
        assert!(origin.elapsed() >= deadline);
    });
}

#[test]
fn a_far_deadline_is_pending_and_max_does_not_panic() {
    smol::block_on(async {
        let timer = SmolTimer::new();
        assert_eq!(
            poll_once(timer.sleep_until(Duration::from_secs(3600))).await,
            None
        );
        assert_eq!(poll_once(timer.sleep_until(Duration::MAX)).await, None);
    });
}

#[test]
fn a_completed_sleep_stays_ready() {
    smol::block_on(async {
        let timer = SmolTimer::new();
        let mut sleep = timer.sleep_until(Duration::ZERO);
        assert_eq!(poll_once(&mut sleep).await, Some(()));
        assert_eq!(poll_once(&mut sleep).await, Some(()));
    });
}

#[test]
fn sleeps_on_a_smol_executor_task() {
    let ex = smol::Executor::new();
    let timer = SmolTimer::new();
    let task = ex.spawn(async move {
        timer.sleep_until(Duration::from_millis(10)).await;
        timer.now()
    });
    let woke = smol::block_on(ex.run(task));
    assert!(woke >= Duration::from_millis(10));
}
