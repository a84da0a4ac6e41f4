//! All-or-nothing: two tasks that each need both units of a capacity-2 semaphore
//! both complete in every interleaving, and the second holder is ordered after the
//! first (it sees what the first wrote under its permit).

use std::sync::Arc;

use admit::Semaphore;
use loom::future::block_on;
use loom::thread;
use loom_tests::{assert_idle, shared, Guarded};

/// Takes both units, touches the data they guard, and gives them back.
async fn take_both(semaphore: &Semaphore, data: &Guarded) {
    let permit = semaphore.acquire(2).await.expect("not closed");
    assert_eq!(permit.units(), 2);
    // First, before any other access to the semaphore could synchronise us with
    // the previous holder: the grant itself must order us after it.
    data.bump();
    // Nobody else holds a unit, or is half-way through taking one.
    assert_eq!(semaphore.available(), 0);
    drop(permit);
}

#[test]
fn two_tasks_each_taking_both_units_both_complete() {
    loom::model(|| {
        let semaphore = shared(Semaphore::new(2));
        let data = Arc::new(Guarded::new());

        let other = {
            let (semaphore, data) = (semaphore.clone(), data.clone());
            thread::spawn(move || block_on(take_both(&semaphore, &data)))
        };
        block_on(take_both(&semaphore, &data));
        other.join().unwrap();

        assert_eq!(data.bump(), 3, "both tasks ran");
        assert_idle(&semaphore);
    });
}
