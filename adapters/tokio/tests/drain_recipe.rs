//! The shutdown recipe of the README ("Shutdown and resize"), on both runtime
//! flavours: idle sessions drained beside the gate are reported as a cut only
//! when something was cut.

use std::time::Duration;

use admit::{DrainTimeout, LeaseEnd, LeaseError};

admit::sources! { enum Route { Upload => "upload" } }

const GRACE: Duration = Duration::from_millis(50);

/// A gate of 8 with three idle sessions (and, with `in_flight`, a fourth held
/// by a request through the whole grace), drained as the README says.
async fn shut_down(in_flight: bool) -> Result<(), DrainTimeout<Route>> {
    let gate = admit_tokio::gate::<Route>(8).build().unwrap();
    let uploads = admit_tokio::leases(&gate, Duration::from_secs(30));
    for id in 0..4 {
        let permit = gate.try_acquire(1, Route::Upload).unwrap();
        uploads.insert(id, permit, Vec::<u8>::new()).unwrap();
    }
    let request = if in_flight {
        Some(uploads.checkout(&3).unwrap())
    } else {
        uploads.checkout(&3).unwrap().finish();
        None
    };

    let sessions = uploads.drain(GRACE);
    let requests = gate.drain(GRACE);
    sessions.await;
    let drained = requests.await;

    for id in 0..3 {
        assert_eq!(
            uploads.checkout(&id).unwrap_err(),
            LeaseError::Ended(LeaseEnd::Drained)
        );
    }
    drop(request);
    drained
}

fn runtimes() -> [(&'static str, tokio::runtime::Runtime); 2] {
    [
        (
            "current-thread",
            tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()
                .unwrap(),
        ),
        (
            "multi-thread",
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_time()
                .build()
                .unwrap(),
        ),
    ]
}

#[test]
fn idle_sessions_drained_beside_the_gate_are_not_reported_as_a_cut() {
    for (flavour, runtime) in runtimes() {
        for run in 0..8 {
            assert_eq!(
                runtime.block_on(shut_down(false)),
                Ok(()),
                "{flavour} runtime, run {run}"
            );
        }
    }
}

#[test]
fn a_session_in_flight_through_the_grace_is_reported_as_a_cut() {
    for (flavour, runtime) in runtimes() {
        let cut = runtime.block_on(shut_down(true)).unwrap_err();
        assert_eq!(cut.units(), 1, "{flavour} runtime");
    }
}
