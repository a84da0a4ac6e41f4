//! Property 5, the lock-free fast path: uncontended acquire and release allocate
//! nothing, parking allocates nothing (the wait node lives in the future), and the
//! queue lock is never held while a waker runs, so a waker may re-enter the
//! semaphore.

mod wakers;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::task::{Context, Wake, Waker};

use admit::Semaphore;
use wakers::Task;

/// Counts this thread's allocations, so the test harness's other threads do not
/// disturb the count.
struct CountingAlloc;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: delegates to the system allocator; the counter is a const-initialised
// thread-local without destructor, so touching it does not allocate.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAlloc = CountingAlloc;

fn allocations_in(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

#[test]
fn uncontended_paths_do_not_allocate() {
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
fn parking_and_granting_do_not_allocate() {
    let sem = Semaphore::new(1);
    let (counter, waker) = wakers::counting();
    let n = allocations_in(|| {
        for _ in 0..1_000 {
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
        }
    });
    assert_eq!((n, counter.wakes()), (0, 1_000));
}

/// A waker that, when woken, re-enters the semaphore: takes the slow path of a new
/// acquire (which needs the queue lock) and releases. If the lock were held across
/// the wake, this would spin forever.
struct Reentrant {
    sem: Arc<Semaphore>,
    reentered: AtomicUsize,
}

impl Wake for Reentrant {
    fn wake(self: Arc<Self>) {
        let mut nested = Task::new(self.sem.clone().acquire_owned(self.sem.capacity()));
        nested.pending(); // parks: takes the lock
        drop(nested); // cancels: takes the lock again
        self.reentered.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn wakers_run_outside_the_queue_lock() {
    let sem = Arc::new(Semaphore::new(2));
    let held = sem.clone().try_acquire_owned(2).unwrap();
    let reentrant = Arc::new(Reentrant {
        sem: sem.clone(),
        reentered: AtomicUsize::new(0),
    });
    let waker = Waker::from(reentrant.clone());
    let mut fut = Box::pin(sem.clone().acquire_owned(1));
    assert!(fut
        .as_mut()
        .poll(&mut Context::from_waker(&waker))
        .is_pending());
    drop(held); // grants `fut`, wakes `Reentrant`
    assert_eq!(reentrant.reentered.load(Ordering::SeqCst), 1);
    let permit = fut.as_mut().poll(&mut Context::from_waker(&waker));
    assert!(permit.is_ready());
    drop(permit);
    assert_eq!((sem.available(), sem.waiters()), (2, 0));
}

/// A waker whose clone re-enters the semaphore: clones happen before the lock.
#[test]
fn waker_clones_run_outside_the_queue_lock() {
    static SEM: OnceLock<Semaphore> = OnceLock::new();
    let sem = SEM.get_or_init(|| Semaphore::new(1));
    fn clone(_: *const ()) -> std::task::RawWaker {
        // Re-enter: a slow-path poll of a fresh acquire takes the queue lock.
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
