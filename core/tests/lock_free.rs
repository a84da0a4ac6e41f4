//! Property 5: uncontended acquire and release allocate nothing, parking allocates
//! a segment of cells at most once per 31 parks (a freed segment's block serves
//! the next) and the grant, the re-poll and the wake-up nothing more; and no
//! waker runs (nor is cloned) while a thread holds the serving role, so a waker may
//! re-enter the semaphore.
// Needs the `alloc` feature (the feature powerset builds every test target).
#![cfg(feature = "alloc")]

mod wakers;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Wake, Waker};

use admit::{AcquireOwned, Semaphore};
use wakers::{Counter, Task};

/// Counts this thread's allocations, so the test harness's other threads do not
/// disturb the count.
struct CountingAlloc;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
    /// Allocations made minus allocations freed, on this thread.
    static LIVE: Cell<isize> = const { Cell::new(0) };
}

// SAFETY: delegates to the system allocator; the counter is a const-initialised
// thread-local without destructor, so touching it does not allocate.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        let _ = LIVE.try_with(|n| n.set(n.get() + 1));
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let _ = LIVE.try_with(|n| n.set(n.get() - 1));
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

/// The block a freed segment leaves for the next allocation is the process's
/// (one for every semaphore): tests that count allocations run one at a time,
/// so that no other test's segment passes through it meanwhile.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn allocations_in(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

/// Allocations `f` left alive (made and not freed) on this thread.
fn left_alive_by(f: impl FnOnce()) -> isize {
    let before = LIVE.with(Cell::get);
    f();
    LIVE.with(Cell::get) - before
}

/// `callers` acquires of one unit of `sem`, whose units are all held: each
/// parks at its first poll and is dropped (a cancel).
fn park_and_give_up(sem: &Semaphore, callers: usize) {
    for _ in 0..callers {
        let mut fut = std::pin::pin!(sem.acquire(1));
        assert!(fut
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
            .is_pending());
    }
}

#[test]
fn cancelled_nodes_are_freed_while_every_unit_stays_held() {
    // A holder that never releases and callers that give up: no release ever asks
    // for service, so the cancels must let their cells go without a server, or
    // the memory grows with every caller that timed out. Left: the cursor's
    // segment (it is passed, never removed), the one being filled, and the
    // block kept for the next allocation.
    let _serial = one_at_a_time();
    let sem = Semaphore::new(1);
    let held = sem.try_acquire(1).unwrap();
    let callers = if cfg!(miri) { 200 } else { 10_000 };
    let alive = left_alive_by(|| park_and_give_up(&sem, callers));
    assert!(
        alive <= 3,
        "{alive} segments still allocated after {callers} cancels"
    );
    drop(held);
    assert_eq!(sem.available(), 1);
    assert_eq!(sem.waiters(), 0);
}

#[test]
fn dropping_the_semaphore_frees_the_cancelled_nodes_it_still_holds() {
    // A cancel with no unit free whose node another parker has pushed above (so it
    // cannot withdraw it) leaves the node for the next serving pass; if the
    // semaphore goes first (its last permit leaked), its drop must free the node.
    // (A lone parked future would withdraw its node on cancel and leave nothing.)
    let _serial = one_at_a_time();
    let alive = left_alive_by(|| {
        let sem = Semaphore::new(1);
        std::mem::forget(sem.try_acquire(1).unwrap());
        let cx = &mut Context::from_waker(Waker::noop());
        let mut below = Box::pin(sem.acquire(1));
        assert!(below.as_mut().poll(cx).is_pending());
        let mut above = Box::pin(sem.acquire(1));
        assert!(above.as_mut().poll(cx).is_pending());
        drop(below); // buried under `above`: a cancel entry, and no unit free
        drop(above); // on top: withdrawn
        drop(sem);
    });
    // The last segment freed may be the block kept for the next allocation.
    assert!(
        alive <= 1,
        "the semaphore's drop left {alive} segments allocated"
    );
}

#[test]
fn uncontended_paths_do_not_allocate() {
    let _serial = one_at_a_time();
    let sem = Semaphore::new(4);
    let waker = Waker::noop();
    let n = allocations_in(|| {
        for _ in 0..1_000 {
            drop(sem.try_acquire(2).unwrap());
            let mut fut = std::pin::pin!(sem.acquire(3));
            let permit = fut.as_mut().poll(&mut Context::from_waker(waker));
            assert!(permit.is_ready());
        }
    });
    assert_eq!(n, 0);
}

#[test]
fn parking_allocates_at_most_a_segment_per_31_parks_and_granting_nothing() {
    let _serial = one_at_a_time();
    let sem = Semaphore::new(1);
    let (counter, waker) = wakers::counting();
    let (mut parks, mut grants) = (0, 0);
    for _ in 0..1_000 {
        let held = sem.try_acquire(1).unwrap();
        let mut fut = std::pin::pin!(sem.acquire(1));
        parks += allocations_in(|| {
            assert!(fut
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_pending());
        });
        grants += allocations_in(|| {
            drop(held);
            assert!(fut
                .as_mut()
                .poll(&mut Context::from_waker(&waker))
                .is_ready());
        });
    }
    // The first segment, then at most one per 31 tickets.
    assert!(
        parks <= 1_000 / 31 + 1,
        "{parks} allocations for 1 000 parks"
    );
    assert_eq!((grants, counter.wakes()), (0, 1_000));
}

#[test]
fn parking_and_cancelling_without_end_reuses_the_freed_segments() {
    // Every unit held, callers that park and give up: a segment is filled every
    // 31 parks and freed every 31 cancels, and the block the last free left
    // serves the next allocation instead of the heap (an aligned allocation is
    // slow in common allocators).
    let _serial = one_at_a_time();
    let sem = Semaphore::new(1);
    let held = sem.try_acquire(1).unwrap();
    let callers = if cfg!(miri) { 200 } else { 10_000 };
    let allocations = allocations_in(|| park_and_give_up(&sem, callers));
    // The first segment and its successor; then the freed ones come back.
    assert!(
        allocations <= 3,
        "{allocations} heap allocations for {callers} parks: freed segments are not reused"
    );
    drop(held);
}

/// A waker that, when woken, re-enters the semaphore: it drops the parked head
/// `B`, whose cancel asks for service so that `C`, behind it, is granted. Run
/// outside the serving role (as it must be), that cancel serves at once and `C` is
/// woken before the waker returns; run inside the role, the cancel could only leave
/// the work to the role's holder, and `C` would not be woken yet.
struct Reentrant {
    head: Mutex<Option<Task<AcquireOwned>>>,
    behind: Arc<Counter>,
    behind_woken_before_return: AtomicUsize,
}

impl Wake for Reentrant {
    fn wake(self: Arc<Self>) {
        drop(self.head.lock().unwrap().take()); // cancels B, the head
        let woken = self.behind.wakes();
        self.behind_woken_before_return
            .store(woken, Ordering::SeqCst);
    }
}

#[test]
fn wakers_run_outside_the_serving_role() {
    let _serial = one_at_a_time();
    let sem = Arc::new(Semaphore::new(2));
    let held = sem.clone().try_acquire_owned(2).unwrap();
    let mut b = Task::new(sem.clone().acquire_owned(2));
    let mut c = Task::new(sem.clone().acquire_owned(1));
    // A parks first, then B (needs both units), then C.
    let mut a = Box::pin(sem.clone().acquire_owned(1));
    let reentrant = Arc::new(Reentrant {
        head: Mutex::new(None),
        behind: c.counter.clone(),
        behind_woken_before_return: AtomicUsize::new(usize::MAX),
    });
    let waker = Waker::from(reentrant.clone());
    assert!(a
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    b.pending();
    c.pending();
    *reentrant.head.lock().unwrap() = Some(b);
    drop(held); // grants A (1 unit); B does not fit; A's waker cancels B
    assert_eq!(
        reentrant.behind_woken_before_return.load(Ordering::SeqCst),
        1,
        "C was not granted while A's waker ran"
    );
    let a = a.as_mut().poll(&mut Context::from_waker(&waker));
    let c = c.ready();
    assert!(matches!(a, std::task::Poll::Ready(Ok(_))) && c.is_ok());
    drop((a, c));
    assert_eq!((sem.available(), sem.waiters()), (2, 0));
}

/// A waker whose clone re-enters the semaphore: clones happen before the node is
/// shared, never in the serving role.
#[test]
fn waker_clones_run_outside_the_serving_role() {
    let _serial = one_at_a_time();
    static SEM: OnceLock<Semaphore> = OnceLock::new();
    let sem = SEM.get_or_init(|| Semaphore::new(1));
    fn clone(_: *const ()) -> std::task::RawWaker {
        // Re-enter: a slow-path poll of a fresh acquire parks and joins.
        let sem = SEM.get().unwrap();
        let mut nested = std::pin::pin!(sem.acquire(1));
        let _ = nested
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()));
        std::task::RawWaker::new(std::ptr::null(), &VTABLE)
    }
    fn noop(_: *const ()) {}
    static VTABLE: std::task::RawWakerVTable =
        std::task::RawWakerVTable::new(clone, noop, noop, noop);
    // SAFETY: the vtable's functions ignore the data pointer and uphold the RawWaker
    // contract (clone returns a valid waker, the others do nothing).
    let waker = unsafe { Waker::from_raw(std::task::RawWaker::new(std::ptr::null(), &VTABLE)) };

    let held = sem.try_acquire(1).unwrap();
    let mut fut = std::pin::pin!(sem.acquire(1));
    assert!(fut
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    drop(held);
    assert!(fut
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_ready());
    assert_eq!(sem.waiters(), 0);
}
