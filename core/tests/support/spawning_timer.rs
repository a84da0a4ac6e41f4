//! A `ManualTimer` that can spawn: the tasks a gate gives it (its memory
//! watch, its overload watch) wait until the test polls them by hand
//! (`SpawningTimer::run`). Self-contained (std, `admit` and the manual
//! timer): the model crate includes it with `#[path]`, as it does the manual
//! timer.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Waker};
use std::time::Duration;

use super::manual_timer::ManualTimer;

type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A manual clock whose spawned tasks the test polls by hand. Clones share the
/// clock and the tasks.
#[derive(Clone, Default)]
pub struct SpawningTimer {
    clock: ManualTimer,
    tasks: Arc<Mutex<Vec<Task>>>,
    /// Spawns still to refuse.
    refuse: Arc<AtomicUsize>,
}

impl SpawningTimer {
    /// A clock at zero that takes every task.
    pub fn new() -> Self {
        Self::default()
    }

    /// A clock at zero that refuses the first `refuse` spawns (as a timer that
    /// cannot spawn refuses them), then takes the rest.
    pub fn refusing(refuse: usize) -> Self {
        Self {
            refuse: Arc::new(AtomicUsize::new(refuse)),
            ..Self::default()
        }
    }

    /// The clock.
    pub fn clock(&self) -> &ManualTimer {
        &self.clock
    }

    /// Polls every task once (they are woken only by the clock); those that
    /// end are dropped.
    pub fn run(&self) {
        let mut tasks = self.tasks.lock().unwrap();
        let mut cx = Context::from_waker(Waker::noop());
        tasks.retain_mut(|task| task.as_mut().poll(&mut cx).is_pending());
    }

    /// Tasks spawned that have not ended.
    pub fn tasks(&self) -> usize {
        self.tasks.lock().unwrap().len()
    }
}

impl std::fmt::Debug for SpawningTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpawningTimer")
            .field("now", &self.clock.now())
            .field("tasks", &self.tasks())
            .finish_non_exhaustive()
    }
}

impl admit::Timer for SpawningTimer {
    type Sleep = <ManualTimer as admit::Timer>::Sleep;

    fn now(&self) -> Duration {
        self.clock.now()
    }

    fn sleep_until(&self, deadline: Duration) -> Self::Sleep {
        admit::Timer::sleep_until(&self.clock, deadline)
    }

    fn spawn(&self, task: Box<dyn Future<Output = ()> + Send + 'static>) -> bool {
        let refused = self
            .refuse
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if !refused {
            self.tasks.lock().unwrap().push(Box::into_pin(task));
        }
        !refused
    }
}
