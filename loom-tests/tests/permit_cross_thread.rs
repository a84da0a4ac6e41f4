//! An owned permit moved to another thread and dropped there returns its units,
//! wakes the waiter parked on the first thread, and hands over what was written
//! under it.

use std::sync::Arc;

use admit::Semaphore;
use loom::future::block_on;
use loom::thread;
use loom_tests::{assert_idle, Guarded};

#[test]
fn owned_permit_dropped_on_another_thread_wakes_waiter() {
    loom::model(|| {
        let semaphore = Arc::new(Semaphore::new(2));
        let data = Arc::new(Guarded::new());
        let permit = block_on(semaphore.clone().acquire_owned(2)).expect("not closed");
        assert_eq!(semaphore.available(), 0);

        let mover = {
            let data = data.clone();
            thread::spawn(move || {
                assert_eq!(permit.units(), 2);
                assert_eq!(data.bump(), 1);
                drop(permit);
            })
        };
        // Parks (or not, if the mover was quick) until the moved permit is dropped,
        // then must see the mover's write through the grant alone.
        let mine = block_on(semaphore.acquire(2)).expect("not closed");
        assert_eq!(data.bump(), 2);
        assert_eq!(semaphore.available(), 0);
        drop(mine);

        mover.join().unwrap();
        assert_idle(&semaphore);
    });
}
