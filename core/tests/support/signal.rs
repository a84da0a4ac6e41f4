//! A one-shot cancellation signal a test fires by hand. Self-contained (std only):
//! the model crate (`model/src/lib.rs`) includes it with `#[path]` for the gate model.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// The firing side; clones share the signal.
#[derive(Clone, Debug, Default)]
pub struct Trigger {
    state: Arc<Mutex<(bool, Option<Waker>)>>,
}

impl Trigger {
    /// A signal not yet fired.
    pub fn new() -> Self {
        Self::default()
    }

    /// Fires the signal and wakes whoever waits on it.
    pub fn fire(&self) {
        let waker = {
            let mut state = self.state.lock().unwrap();
            state.0 = true;
            state.1.take()
        };
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// A future that completes once fired.
    pub fn fired(&self) -> Fired {
        Fired {
            state: Arc::clone(&self.state),
        }
    }
}

/// Completes once its [`Trigger`] fired.
#[derive(Debug)]
pub struct Fired {
    state: Arc<Mutex<(bool, Option<Waker>)>>,
}

impl Future for Fired {
    type Output = ();
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.state.lock().unwrap();
        if state.0 {
            Poll::Ready(())
        } else {
            state.1 = Some(cx.waker().clone());
            Poll::Pending
        }
    }
}
