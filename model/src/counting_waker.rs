//! A waker that counts its calls: how the replays check "no lost wake-up, no
//! needless one".

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Wake;

/// Counts `wake` and `wake_by_ref` calls; `Waker::from(Arc<CountingWaker>)` makes
/// the waker, and the `Arc`'s strong count says whether anyone still holds it.
#[derive(Debug, Default)]
pub(crate) struct CountingWaker {
    wakes: AtomicUsize,
}

impl CountingWaker {
    /// The calls so far.
    pub(crate) fn count(&self) -> usize {
        self.wakes.load(Ordering::SeqCst)
    }
}

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.wakes.fetch_add(1, Ordering::SeqCst);
    }
}
