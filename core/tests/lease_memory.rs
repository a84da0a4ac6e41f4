//! A lease table gives memory back: once a burst of abandoned sessions has
//! expired and its ids are forgotten, the bytes the table holds (counted by
//! the allocator, not RSS) are within twice what its live leases need.
//! One test in its own binary: the count is process-wide.
#![cfg(feature = "std")]

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::future::Future;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Wake, Waker};
use std::time::Duration;

use admit::{Gate, LeaseEnd, LeaseError, Leases};
use support::{ManualTimer, Src};

struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is passed on to `System` unchanged; the counter is only
// arithmetic beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for `alloc`, passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: the caller's contract for `dealloc`, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE_BYTES.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: the caller's contract for `realloc`, passed on.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn bytes() -> isize {
    LIVE_BYTES.load(Ordering::Relaxed)
}

struct Nothing;

impl Wake for Nothing {
    fn wake(self: Arc<Self>) {}
}

const IDLE: Duration = Duration::from_secs(30);
const KEPT: u32 = 1_000;
const BURST: u32 = 200_000;

#[test]
#[cfg_attr(
    miri,
    ignore = "200 000 leases; it checks the table's bytes, and has no unsafe code of its own to check"
)]
fn a_burst_of_abandoned_sessions_leaves_no_memory_once_forgotten() {
    let timer = ManualTimer::new();
    let gate = Gate::builder((KEPT + BURST) as usize)
        .timer(timer.clone())
        .build()
        .unwrap();
    let waker = Waker::from(Arc::new(Nothing));
    let mut cx = Context::from_waker(&waker);

    let empty = bytes();
    let (leases, driver) = Leases::with_driver(&gate, IDLE);
    let mut driver = Box::pin(driver);
    let mut drive = || assert!(driver.as_mut().poll(&mut cx).is_pending());
    let open = |id: u32| {
        let permit = gate.try_acquire(1, Src::Upload).unwrap();
        leases.insert(id, permit, ()).unwrap();
    };
    (0..KEPT).for_each(open);
    drive();
    let need = bytes() - empty;

    (KEPT..KEPT + BURST).for_each(open);
    let peak = bytes() - empty;
    // The kept sessions stay busy; the burst's clients went away.
    timer.advance(IDLE - Duration::from_secs(1));
    (0..KEPT).for_each(|id| leases.touch(&id).unwrap());
    timer.advance(Duration::from_secs(1));
    drive();
    assert_eq!(gate.in_use(), KEPT as usize);
    assert_eq!(
        leases.touch(&KEPT),
        Err(LeaseError::Ended(LeaseEnd::Expired))
    );
    // Their ids are remembered for the idle limit, then forgotten.
    timer.advance(IDLE - Duration::from_secs(2));
    (0..KEPT).for_each(|id| leases.touch(&id).unwrap());
    timer.advance(Duration::from_secs(2));
    drive();
    assert_eq!(leases.touch(&KEPT), Err(LeaseError::Unknown));
    let after = bytes() - empty;
    assert!(
        after <= 2 * need,
        "{after} bytes held for {KEPT} live leases, which need {need} (peak {peak})"
    );
    eprintln!(
        "{KEPT} live leases: {need} bytes; after a burst of {BURST}: peak {peak}, then {after}"
    );
}
