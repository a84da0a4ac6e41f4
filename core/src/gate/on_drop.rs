//! A step that must happen after a call into user code (an observer hook, a
//! timer) whether that call returns or panics: it runs as the guard drops, at the
//! end of its scope or on the unwind.

/// Runs its closure when dropped, unless [disarmed](Self::disarm).
pub(crate) struct OnDrop<F: FnOnce()>(Option<F>);

impl<F: FnOnce()> OnDrop<F> {
    pub(crate) fn new(step: F) -> Self {
        Self(Some(step))
    }

    /// Drops the guard without running the step: for a step owed only on unwind.
    pub(crate) fn disarm(mut self) {
        self.0 = None;
    }
}

impl<F: FnOnce()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        if let Some(step) = self.0.take() {
            step();
        }
    }
}
