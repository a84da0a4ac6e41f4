//! A request shed for a higher class at its very first poll: the semaphore can
//! resolve it `SHED` between its join and its first read of its phase, before
//! the gate has counted it among the parked. It must end as a shed at arrival,
//! told once, with the gate's books exact (no panic for a "parked request" that
//! never parked).
//!
//! The setup, on one thread: capacity 1, `max_waiters` 1; a sheddable request
//! parks and is then granted by the semaphore, but its owner has not polled it
//! again, so the gate still counts it among the parked (its class holds the one
//! place). Then two threads: a critical request arrives at that full queue and
//! posts a shed for the sheddable class, whose only request in the semaphore's
//! queue is the sheddable one arriving on the other thread. Whether the shed
//! lands before its join, inside its first poll, or not at all, every ending is
//! a shed at arrival told once, and every unit and place comes back.
//!
//! Regression model: the gate before `gate/protocol.rs` panicked in the
//! interleaving where the shed lands inside the first poll ("only a parked
//! request is shed").

use core::pin::pin;
use core::task::{Poll, Waker};
use std::sync::Arc;

use admit::{Gate, GateError, Observer, Priority, ShedEvent, ShedReason};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;
use loom_tests::{poll_once, Frozen};

admit::sources! {
    /// The model's call site.
    enum Src { Upload => "upload" }
}

/// Counts the sheds the gate tells.
#[derive(Default)]
struct Sheds(AtomicUsize);

impl Observer for Sheds {
    fn on_shed(&self, _: &ShedEvent) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

type ModelGate = Gate<Src, Frozen, Arc<Sheds>>;

#[test]
fn a_shed_at_the_first_poll_ends_as_a_shed_at_arrival() {
    loom::model(|| {
        let sheds = Arc::new(Sheds::default());
        let gate: ModelGate = Gate::builder(1)
            .max_units(1)
            .max_waiters(1)
            .timer(Frozen)
            .observer(Arc::clone(&sheds))
            .build()
            .expect("valid config");

        // The unit held; a sheddable request parks behind it, then is granted
        // by the release while its owner is away: still counted as parked.
        let held = gate.try_acquire(1, Src::Upload).expect("free");
        let mut granted = pin!(gate.acquire(1, Src::Upload).priority(Priority::Sheddable));
        assert!(poll_once(granted.as_mut(), Waker::noop()).is_pending());
        held.release();

        let critical = {
            let gate = gate.clone();
            thread::spawn(move || {
                let mut critical = pin!(gate.acquire(1, Src::Upload).priority(Priority::Critical));
                // Parks (taking the sheddable class's place) or, its turn
                // racing nothing it can win, stays pending; never shed: no
                // class below it is left unshed.
                assert!(poll_once(critical.as_mut(), Waker::noop()).is_pending());
            })
        };

        let mut arriving = pin!(gate.acquire(1, Src::Upload).priority(Priority::Sheddable));
        let told = match poll_once(arriving.as_mut(), Waker::noop()) {
            // Outranked: shed inside its first poll. QueueFull: its class
            // holds the one place and nobody is below it.
            Poll::Ready(Err(GateError::Busy { reason, .. })) => {
                assert!(
                    matches!(reason, ShedReason::Outranked | ShedReason::QueueFull),
                    "{reason:?}"
                );
                1
            }
            other => panic!("a sheddable arrival at a full queue: {other:?}"),
        };
        critical.join().unwrap();

        // The granted request's owner comes back for its unit.
        match poll_once(granted.as_mut(), Waker::noop()) {
            Poll::Ready(Ok(permit)) => permit.release(),
            other => panic!("the granted request: {other:?}"),
        }
        assert_eq!(sheds.0.load(Ordering::SeqCst), told, "each shed told once");
        assert_eq!(gate.in_use(), 0, "every unit back");
        // Every place among the parked back: the one place is free again.
        let held = gate.try_acquire(1, Src::Upload).expect("every unit back");
        let mut next = pin!(gate.acquire(1, Src::Upload).priority(Priority::Sheddable));
        assert!(
            poll_once(next.as_mut(), Waker::noop()).is_pending(),
            "the place is free"
        );
        drop(held);
    });
}
