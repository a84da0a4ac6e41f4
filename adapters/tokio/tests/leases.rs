//! Leases on Tokio's paused clock, driven by the task `admit_tokio::leases`
//! spawns: an idle lease ends at its limit with no request arriving, value
//! before units; one checked out by a long request does not; the task ends
//! with the table.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use admit::{LeaseEnd, LeaseEndEvent, LeaseError, Observer};

admit::sources! { enum Route { Upload => "upload" } }

#[derive(Default)]
struct Ends(Mutex<Vec<(LeaseEnd, Duration)>>);

impl Observer for Ends {
    fn on_lease_end(&self, e: &LeaseEndEvent) {
        self.0.lock().unwrap().push((e.how, e.held));
    }
}

/// A session's value that records the units in use when it is dropped.
struct Session {
    in_use_at_drop: Arc<AtomicUsize>,
    gate: admit_tokio::Gate<Route, Arc<Ends>>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.in_use_at_drop
            .store(self.gate.in_use(), Ordering::SeqCst);
    }
}

const IDLE: Duration = Duration::from_secs(30);

#[tokio::test(start_paused = true)]
async fn an_idle_lease_ends_at_its_limit_and_a_checked_out_one_does_not() {
    let ends = Arc::new(Ends::default());
    let gate = admit_tokio::gate::<Route>(4)
        .observer(Arc::clone(&ends))
        .build()
        .unwrap();
    let uploads = admit_tokio::leases(&gate, IDLE);
    let dropped_at = Arc::new(AtomicUsize::new(usize::MAX));
    for id in ["idle", "busy"] {
        let permit = gate.try_acquire(1, Route::Upload).unwrap();
        let session = Session {
            in_use_at_drop: Arc::clone(&dropped_at),
            gate: gate.clone(),
        };
        assert!(uploads.insert(id, permit, session).is_ok());
    }
    let busy = uploads.checkout("busy").unwrap();

    tokio::time::sleep(IDLE - Duration::from_millis(1)).await;
    assert_eq!(gate.in_use(), 2);
    tokio::time::sleep(Duration::from_millis(1)).await;
    tokio::task::yield_now().await;
    assert_eq!(gate.in_use(), 1, "the idle one ended, with no request");
    assert_eq!(dropped_at.load(Ordering::SeqCst), 2, "its value went first");
    assert_eq!(*ends.0.lock().unwrap(), [(LeaseEnd::Expired, IDLE)]);
    assert_eq!(
        uploads.checkout("idle").unwrap_err(),
        LeaseError::Ended(LeaseEnd::Expired)
    );

    // In flight for three limits; then idle for one.
    tokio::time::sleep(IDLE * 2).await;
    assert_eq!(gate.in_use(), 1);
    drop(busy);
    tokio::time::sleep(IDLE).await;
    tokio::task::yield_now().await;
    assert_eq!(gate.in_use(), 0);
    assert_eq!(ends.0.lock().unwrap()[1], (LeaseEnd::Expired, IDLE * 4));
}
