//! The heap meter: the benchmark's global allocator, which counts the bytes live
//! on the heap so that a storm can report how far the heap grew while it ran.
//!
//! Every allocation and free adds to or takes from a counter of the thread that
//! makes it, one cache line per thread slot, so counting adds an uncontended
//! `fetch_add` and never a shared line the peers' own atomics would have to fight
//! over. Bytes allocated by one thread and freed by another move between slots;
//! only the sum means anything. [`live`] reads that sum: a snapshot, exact when no
//! thread allocates meanwhile and within the bytes in flight otherwise. A storm
//! samples it from its idle main thread.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

/// Thread slots; threads beyond this share slots (still exact, only contended).
const SLOTS: usize = 64;

#[repr(align(128))]
struct Slot(AtomicIsize);

static COUNTS: [Slot; SLOTS] = [const { Slot(AtomicIsize::new(0)) }; SLOTS];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    // `const` and without `Drop`: usable from inside the allocator, at any point
    // of a thread's life.
    static MY_SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// [`System`], counting the bytes live.
#[derive(Debug)]
pub struct Counting;

#[global_allocator]
static HEAP: Counting = Counting;

fn count(bytes: isize) {
    let slot = MY_SLOT.with(|slot| {
        if slot.get() == usize::MAX {
            slot.set(NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SLOTS);
        }
        slot.get()
    });
    COUNTS[slot].0.fetch_add(bytes, Ordering::Relaxed);
}

/// Bytes live on the heap right now (see the module docs for its precision).
#[must_use]
pub fn live() -> isize {
    COUNTS.iter().map(|c| c.0.load(Ordering::Relaxed)).sum()
}

// SAFETY: every call goes to `System` unchanged; the counting only reads the
// layout and touches atomics and a `const` thread-local, none of which allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            count(layout.size() as isize);
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            count(layout.size() as isize);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(-(layout.size() as isize));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, passed on.
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() {
            count(new_size as isize - layout.size() as isize);
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::live;

    #[test]
    fn the_meter_sees_bytes_allocated_and_freed_on_other_threads() {
        // Other tests allocate meanwhile: a block far above their footprint, and a
        // margin of 16 MiB either way. Zeroed, so the system maps it lazily.
        const BLOCK: usize = 256 << 20;
        const MARGIN: isize = 16 << 20;
        let before = live();
        let block = std::thread::spawn(|| vec![0u8; BLOCK]).join().unwrap();
        let grown = live() - before;
        assert!(
            grown >= BLOCK as isize - MARGIN,
            "grew {grown} bytes for the block"
        );
        std::thread::spawn(move || drop(block)).join().unwrap();
        let left = live() - before;
        assert!(left < MARGIN, "{left} bytes still counted after the free");
    }
}
