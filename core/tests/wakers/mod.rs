//! Hand-driven polling for deterministic tests: wakers that count their wake-ups.

#![allow(dead_code)] // each test binary uses a different part

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

/// A waker that counts how often it was woken.
#[derive(Default)]
pub struct Counter(AtomicUsize);

impl Counter {
    pub fn wakes(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

impl Wake for Counter {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A fresh counting waker and its counter.
pub fn counting() -> (Arc<Counter>, Waker) {
    let counter = Arc::new(Counter::default());
    (counter.clone(), Waker::from(counter))
}

/// A future under test with its own counting waker.
pub struct Task<F: Future> {
    pub fut: Pin<Box<F>>,
    pub counter: Arc<Counter>,
    waker: Waker,
}

impl<F: Future> Task<F> {
    pub fn new(fut: F) -> Self {
        let (counter, waker) = counting();
        Self {
            fut: Box::pin(fut),
            counter,
            waker,
        }
    }

    pub fn poll(&mut self) -> Poll<F::Output> {
        self.fut
            .as_mut()
            .poll(&mut Context::from_waker(&self.waker))
    }

    /// Polls and expects `Pending`.
    #[track_caller]
    pub fn pending(&mut self) {
        assert!(
            self.poll().is_pending(),
            "expected the future to be pending"
        );
    }

    /// Polls and expects `Ready`.
    #[track_caller]
    pub fn ready(&mut self) -> F::Output {
        match self.poll() {
            Poll::Ready(out) => out,
            Poll::Pending => panic!("expected the future to be ready"),
        }
    }

    pub fn wakes(&self) -> usize {
        self.counter.wakes()
    }
}
