//! In the crate's tests, a freed segment is marked and its memory kept until its
//! list is dropped: a use after the free fails an assertion instead of being
//! undefined, a second free fails another, and the drop checks that every
//! segment the list allocated was freed. In every other build the graveyard is
//! `()` and nothing here does anything.

#[cfg(test)]
use core::ptr::NonNull;
#[cfg(test)]
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

#[cfg(test)]
use super::segment::Segment;
use super::Segments;

#[cfg(not(test))]
pub(super) type Graveyard = ();

#[cfg(not(test))]
impl<C> Segments<C> {
    /// The graveyard, in the crate's tests.
    #[inline(always)]
    pub(super) fn graveyard(&self) -> &Graveyard {
        &()
    }

    /// In the crate's tests, the drop's check of the freed segments, and their freeing.
    #[inline(always)]
    pub(super) fn close_graveyard(&mut self) {}
}

/// What a list allocated and freed: its drop checks that every segment was freed
/// once, then frees their memory.
#[cfg(test)]
#[derive(Default)]
pub(super) struct Graveyard {
    allocated: AtomicUsize,
    freed: std::sync::Mutex<alloc::vec::Vec<Buried>>,
}

/// A freed segment's address, with its provenance: the drop frees its memory
/// through it.
#[cfg(test)]
struct Buried(NonNull<u8>);

// SAFETY: an address the graveyard only keeps, for the list's drop (whichever
// thread runs it) to free.
#[cfg(test)]
unsafe impl Send for Buried {}

#[cfg(test)]
impl Graveyard {
    /// Counts a segment allocated.
    pub(super) fn count_allocation(&self) {
        self.allocated.fetch_add(1, Ordering::Relaxed);
    }

    /// Checks that every segment the list allocated was freed, then frees
    /// their memory and the graveyard's.
    ///
    /// # Safety
    ///
    /// `graveyard` came from the list's `Box::into_raw`, every segment buried in
    /// it is a `Segment<C>`, and nothing uses the graveyard or a segment of the
    /// list again.
    unsafe fn close<C>(graveyard: NonNull<Graveyard>) {
        // SAFETY: by the caller, ours to free.
        let graveyard = unsafe { alloc::boxed::Box::from_raw(graveyard.as_ptr()) };
        let freed = graveyard.freed.into_inner().unwrap();
        if !std::thread::panicking() {
            let allocated = graveyard.allocated.into_inner();
            assert_eq!(freed.len(), allocated, "a segment leaked");
        }
        for Buried(segment) in freed {
            // SAFETY: freed once each (a second free fails its check), and by
            // the caller a `Segment<C>` nobody touches again.
            unsafe { Segment::<C>::dealloc(segment.cast()) };
        }
    }
}

/// A segment's mark that it was freed, and the list that keeps its memory until
/// its drop.
#[cfg(test)]
pub(super) struct Quarantine {
    freed: AtomicBool,
    graveyard: *const Graveyard,
}

#[cfg(test)]
impl Quarantine {
    pub(super) fn new(graveyard: &Graveyard) -> Quarantine {
        Quarantine {
            freed: AtomicBool::new(false),
            graveyard,
        }
    }

    /// Fails if the segment was freed.
    #[inline(always)]
    pub(super) fn assert_live(&self) {
        assert!(
            !self.freed.load(Ordering::Relaxed),
            "a segment used after it was freed"
        );
    }

    /// Marks the segment at `segment` (whose quarantine this is) freed, and
    /// leaves its memory to the list's drop. Fails if it was freed already.
    pub(super) fn bury(&self, segment: NonNull<u8>) {
        let was_freed = self.freed.swap(true, Ordering::Relaxed);
        assert!(!was_freed, "a segment freed twice");
        // SAFETY: the list outlives its segments' frees (its drop is the last).
        let graveyard = unsafe { &*self.graveyard };
        graveyard.freed.lock().unwrap().push(Buried(segment));
    }
}

#[cfg(test)]
impl<C> Segments<C> {
    /// Where freed segments wait for the drop: made by the first call.
    pub(super) fn graveyard(&self) -> &Graveyard {
        use core::sync::atomic::Ordering::{AcqRel, Acquire};
        let mut current = self.graveyard.load(Acquire);
        if current.is_null() {
            let fresh = alloc::boxed::Box::into_raw(alloc::boxed::Box::default());
            match self
                .graveyard
                .compare_exchange(current, fresh, AcqRel, Acquire)
            {
                Ok(_) => current = fresh,
                Err(actual) => {
                    // SAFETY: never shared.
                    drop(unsafe { alloc::boxed::Box::from_raw(fresh) });
                    current = actual;
                }
            }
        }
        // SAFETY: the list owns it until the end of its drop.
        unsafe { &*current }
    }

    /// The drop's last step: checks that every segment was freed once, and
    /// frees their memory.
    pub(super) fn close_graveyard(&mut self) {
        let graveyard = self.graveyard.load(Ordering::Acquire);
        if let Some(graveyard) = NonNull::new(graveyard) {
            // SAFETY: the list's own, holding only its segments, and not used
            // again: the list is being dropped, every segment freed before.
            unsafe { Graveyard::close::<C>(graveyard) };
        }
    }

    /// Segments allocated and not yet freed.
    /// While others work, a consistent snapshot: the frees are read between two
    /// reads of the allocations that agree, so both counts are of one moment
    /// (a reader descheduled between two lone reads would count everything
    /// allocated meanwhile as alive).
    pub(crate) fn live_segments(&self) -> usize {
        let graveyard = self.graveyard();
        let allocated = || graveyard.allocated.load(Ordering::SeqCst);
        loop {
            let before = allocated();
            let freed = graveyard.freed.lock().unwrap().len();
            if allocated() == before {
                return before - freed;
            }
        }
    }
}
