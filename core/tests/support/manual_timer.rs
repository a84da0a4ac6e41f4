//! A manual clock for deterministic tests: time moves only when the test calls
//! [`ManualTimer::advance`]. Self-contained (std and `admit` only): the model crate
//! (`model/src/lib.rs`) includes it with `#[path]` for the gate model.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// A clock that starts at zero and advances only by [`ManualTimer::advance`].
/// Clones share the clock.
#[derive(Clone, Debug, Default)]
pub struct ManualTimer {
    clock: Arc<Clock>,
}

#[derive(Debug, Default)]
struct Clock {
    next_id: AtomicU64,
    state: Mutex<ClockState>,
}

#[derive(Debug, Default)]
struct ClockState {
    now: Duration,
    /// Parked sleeps: (id, deadline, waker).
    sleepers: Vec<(u64, Duration, Waker)>,
}

impl ManualTimer {
    /// A clock at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current time.
    pub fn now(&self) -> Duration {
        self.clock.state.lock().unwrap().now
    }

    /// Moves the clock forward by `by` and wakes every sleep now due. Wakers are
    /// called after the clock's lock is released.
    pub fn advance(&self, by: Duration) {
        let due: Vec<Waker> = {
            let mut state = self.clock.state.lock().unwrap();
            state.now += by;
            let now = state.now;
            let mut due = Vec::new();
            state.sleepers.retain(|(_, deadline, waker)| {
                if *deadline <= now {
                    due.push(waker.clone());
                    false
                } else {
                    true
                }
            });
            due
        };
        for waker in due {
            waker.wake();
        }
    }

    /// Sleeps registered and not yet due.
    pub fn pending_sleeps(&self) -> usize {
        self.clock.state.lock().unwrap().sleepers.len()
    }
}

impl admit::Timer for ManualTimer {
    type Sleep = ManualSleep;

    fn now(&self) -> Duration {
        ManualTimer::now(self)
    }

    fn sleep_until(&self, deadline: Duration) -> ManualSleep {
        ManualSleep {
            clock: Arc::clone(&self.clock),
            id: self.clock.next_id.fetch_add(1, Ordering::Relaxed),
            deadline,
        }
    }
}

/// The future of [`ManualTimer`]'s `sleep_until`.
#[derive(Debug)]
pub struct ManualSleep {
    clock: Arc<Clock>,
    id: u64,
    deadline: Duration,
}

impl Future for ManualSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.clock.state.lock().unwrap();
        state.sleepers.retain(|(id, _, _)| *id != self.id);
        if state.now >= self.deadline {
            Poll::Ready(())
        } else {
            state
                .sleepers
                .push((self.id, self.deadline, cx.waker().clone()));
            Poll::Pending
        }
    }
}

impl Drop for ManualSleep {
    fn drop(&mut self) {
        if let Ok(mut state) = self.clock.state.lock() {
            state.sleepers.retain(|(id, _, _)| *id != self.id);
        }
    }
}
