//! Negative control: the all-or-nothing work of `all_or_nothing.rs` split into two
//! one-unit acquires deadlocks, and loom finds the interleaving that does it.

extern crate std;

use core::future::Future;
use core::task::{Context, Poll, Waker};
use std::boxed::Box;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::task::Wake;

use admit::Semaphore;
use loom::thread;
use loom_tests::{assert_idle, fails_with, shared, DEADLOCK};

/// Takes the two units one at a time, holding the first while waiting for the
/// second: the pattern a weighted, all-or-nothing acquire exists to replace.
async fn take_one_then_another(semaphore: &Semaphore) {
    let first = semaphore.acquire(1).await.expect("not closed");
    let second = semaphore.acquire(1).await.expect("not closed");
    drop((first, second));
}

/// Unparks the loom thread that blocks on the future.
struct Unpark(thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// `loom::future::block_on`, except that when loom declares the deadlock (a panic
/// out of `park`) the future is leaked rather than dropped.
///
/// Loom raises that panic with no thread active, so any loom operation while it
/// unwinds panics again and aborts the process: dropping loom's own `block_on`
/// state, or our future's permits and parked acquires, would do exactly that. This
/// executor owns no loom object, and the future it leaks is on the heap, so no
/// parked node dangles.
fn block_on<F: Future>(future: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut future = Box::pin(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut Context::from_waker(&waker)) {
            return output;
        }
        if let Err(deadlock) = catch_unwind(AssertUnwindSafe(thread::park)) {
            core::mem::forget(future);
            resume_unwind(deadlock);
        }
    }
}

/// Each thread holds one unit and parks for the other, so every thread is blocked,
/// which loom reports as a deadlock. Matching the report means the test cannot pass
/// through some other failure. In a child process: the semaphore's segments are
/// loom allocations, and loom aborts when it tears down a failed model with live
/// ones.
#[test]
fn split_acquires_deadlock() {
    fails_with(DEADLOCK, || {
        let semaphore = shared(Semaphore::new(2));
        let other = {
            let semaphore = semaphore.clone();
            thread::spawn(move || block_on(take_one_then_another(&semaphore)))
        };
        block_on(take_one_then_another(&semaphore));
        other.join().unwrap();
        // Reached only by the interleavings that happen not to deadlock.
        assert_idle(&semaphore);
    });
}
