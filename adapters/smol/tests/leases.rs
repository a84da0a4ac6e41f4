//! Leases on smol's clock (a second timer), driven by the task
//! `admit_smol::leases` detaches: an idle lease ends with no request arriving,
//! value before units, counted once; one checked out does not end meanwhile.
//! Real time: each wait polls for the outcome, bounded by a safety net.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use admit::{LeaseEnd, LeaseEndEvent, LeaseError, Observer};

admit::sources! { enum Route { Upload => "upload" } }

#[derive(Default)]
struct Ends(Mutex<Vec<LeaseEnd>>);

impl Observer for Ends {
    fn on_lease_end(&self, e: &LeaseEndEvent) {
        self.0.lock().unwrap().push(e.how);
    }
}

struct Session {
    in_use_at_drop: Arc<AtomicUsize>,
    gate: admit_smol::Gate<Route, Arc<Ends>>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.in_use_at_drop
            .store(self.gate.in_use(), Ordering::SeqCst);
    }
}

/// Waits until `done` holds (fails after 10 s: a safety net, not an ordering).
async fn until(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(10), "never: {what}");
        async_io::Timer::after(Duration::from_millis(5)).await;
    }
}

#[test]
fn an_idle_lease_ends_with_no_request_and_a_checked_out_one_does_not() {
    smol::block_on(async {
        let ends = Arc::new(Ends::default());
        let gate = admit_smol::gate::<Route>(4)
            .observer(Arc::clone(&ends))
            .build()
            .unwrap();
        let idle = Duration::from_millis(100);
        let uploads = admit_smol::leases(&gate, idle);
        let dropped_at = Arc::new(AtomicUsize::new(usize::MAX));
        for id in ["idle", "busy"] {
            let permit = gate.try_acquire(1, Route::Upload).unwrap();
            let session = Session {
                in_use_at_drop: Arc::clone(&dropped_at),
                gate: gate.clone(),
            };
            assert!(uploads.insert(id, permit, session).is_ok());
        }
        let opened = Instant::now();
        let busy = uploads.checkout("busy").unwrap();
        until("the idle lease ended", || gate.in_use() == 1).await;
        assert!(opened.elapsed() >= idle, "not before its limit");
        assert_eq!(dropped_at.load(Ordering::SeqCst), 2, "its value went first");
        assert_eq!(
            uploads.checkout("idle").unwrap_err(),
            LeaseError::Ended(LeaseEnd::Expired)
        );
        // Checked out past several limits: still held; back, it ends a limit later.
        async_io::Timer::after(idle * 3).await;
        assert_eq!(gate.in_use(), 1);
        let returned = Instant::now();
        drop(busy);
        until("the returned lease ended", || gate.in_use() == 0).await;
        assert!(returned.elapsed() >= idle);
        assert_eq!(
            *ends.0.lock().unwrap(),
            [LeaseEnd::Expired, LeaseEnd::Expired]
        );
    });
}
