//! A small tour of the semaphore: weighted all-or-nothing grants in FIFO order,
//! no barging, cancellation, close. Run with `cargo run -p admit --example quickstart`.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use admit::Semaphore;

fn poll<F: Future>(fut: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    fut.poll(&mut Context::from_waker(Waker::noop()))
}

fn main() {
    let sessions = Semaphore::new(4);
    println!("capacity {} units", sessions.capacity());

    let upload = sessions.try_acquire(3).expect("3 of 4 free");
    println!("plain upload holds 3 units; {} free", sessions.available());

    let mut mirror = pin!(sessions.acquire(2)); // needs two sessions at once
    assert!(poll(mirror.as_mut()).is_pending());
    println!(
        "mirror (2 units) parks holding nothing: {} free, {} waiting",
        sessions.available(),
        sessions.waiters()
    );
    assert!(sessions.try_acquire(1).is_err());
    println!("a 1-unit try_acquire is refused: the parked mirror is ahead (no barging)");

    drop(upload);
    let Poll::Ready(Ok(mirror)) = poll(mirror.as_mut()) else {
        unreachable!()
    };
    println!(
        "upload done: mirror granted {} units; {} free",
        mirror.units(),
        sessions.available()
    );

    let mut cancelled = Box::pin(sessions.acquire(4));
    assert!(poll(cancelled.as_mut()).is_pending());
    drop(mirror);
    println!("a 4-unit request was granted on release; dropping it returns the units:");
    drop(cancelled);
    println!(
        "  {} free, {} waiting",
        sessions.available(),
        sessions.waiters()
    );

    sessions.close();
    println!(
        "closed: try_acquire -> {}",
        sessions.try_acquire(1).unwrap_err()
    );
}
