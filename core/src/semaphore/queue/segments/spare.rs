//! One freed segment's memory, kept for the next segment's allocation.
//!
//! A segment is a 2 KiB block aligned to 2 KiB (`ALIGN`, `link.rs`), and an
//! aligned allocation is slow in common allocators (glibc's `posix_memalign`
//! takes about a thousand instructions for an allocation and its free). A list
//! that parks and cancels without end allocates one segment per `CELLS` parks
//! and frees one per `CELLS` cancels, so a block kept from the last free serves
//! the next allocation instead.
//!
//! One slot for the process, since a segment freed by one semaphore serves
//! another as well: a free swaps its block in (and frees the block it took out,
//! if any); an allocation swaps the slot empty. Each block is owned by the slot
//! or by one thread at a time, so neither side ever waits, and a block taken
//! out is as unshared as a fresh allocation: nobody holds a reference to a
//! freed segment (`queue/segments/` invariant *last reference frees*). `AcqRel`
//! on both swaps: whoever takes a block sees every access made to it before it
//! was put in.
//!
//! Not in the crate's tests, whose freed segments stay in their quarantine
//! (`quarantine.rs`), nor under loom, whose atomics cannot be statics (and
//! whose leak check would report the block the slot keeps; miri's does not,
//! as the slot is a static).

use crate::loom::heap::{self, Layout};
#[cfg(not(any(test, admit_loom)))]
use core::sync::atomic::{AtomicPtr, Ordering};

/// The slot: a block of [`is_block`]'s layout, or null.
#[cfg(not(any(test, admit_loom)))]
static SPARE: AtomicPtr<u8> = AtomicPtr::new(core::ptr::null_mut());

/// Whether `layout` is the slot's: one segment's.
#[cfg(not(any(test, admit_loom)))]
fn is_block(layout: Layout) -> bool {
    layout.size() == super::link::ALIGN && layout.align() == super::link::ALIGN
}

/// Memory for a segment of `layout`: the kept block if there is one, else the
/// heap's (null if the heap has none).
///
/// # Safety
/// As for [`heap::alloc`]: `layout` is not zero-sized.
pub(super) unsafe fn alloc(layout: Layout) -> *mut u8 {
    #[cfg(not(any(test, admit_loom)))]
    if is_block(layout) {
        let kept = SPARE.swap(core::ptr::null_mut(), Ordering::AcqRel);
        if !kept.is_null() {
            return kept;
        }
    }
    // SAFETY: by the caller.
    unsafe { heap::alloc(layout) }
}

/// Frees a segment's memory: keeps it for the next allocation, and frees the
/// block kept before.
///
/// # Safety
/// As for [`heap::dealloc`]: `ptr` was allocated by [`alloc()`] with `layout`,
/// its contents are dropped, and nobody uses it again.
pub(super) unsafe fn dealloc(ptr: *mut u8, layout: Layout) {
    #[cfg(not(any(test, admit_loom)))]
    let ptr = if is_block(layout) {
        SPARE.swap(ptr, Ordering::AcqRel)
    } else {
        ptr
    };
    if !ptr.is_null() {
        // SAFETY: by the caller, or the block the slot kept, which an earlier
        // call put there under the same contract (every block is `layout`'s).
        unsafe { heap::dealloc(ptr, layout) };
    }
}
