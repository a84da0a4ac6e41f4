//! The randomized schedules (shuttle's PCT scheduler, `--cfg admit_shuttle`):
//! far longer runs of the claimers and the server than loom can enumerate.

use std::boxed::Box;

use super::claim_serve_return;
use crate::semaphore::tests::shuttle::iterations;

fn shuttle_spawn(f: Box<dyn FnOnce() + Send>) -> Box<dyn FnOnce()> {
    let handle = shuttle::thread::spawn(f);
    Box::new(move || handle.join().unwrap())
}

/// Six claimers of 40 tickets each (eight segments), the server among them.
#[test]
fn segments_six_claimers_pct() {
    shuttle::check_pct(
        || claim_serve_return(6, 40, shuttle_spawn, shuttle::thread::yield_now),
        iterations(),
        3,
    );
}
