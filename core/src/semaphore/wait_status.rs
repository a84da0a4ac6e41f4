//! A parked request's status word and waker: who resolves the request, and who
//! may touch its waker. Shared by both wait queues (`queue/`).
//!
//! # The word
//!
//! ```text
//!    bit 3          bits 2..0
//! [REGISTERING] [ phase ]
//! ```
//!
//! The phase leaves `WAITING` exactly once, by one CAS, and whoever wins it
//! resolves the request: the server (`GRANTED` after taking the units, `SHUT_OUT`
//! when the semaphore closed, `EXCEEDS` when the capacity fell below the request,
//! `SHED` when a shed asked for its rank) or the owner (`CANCELLED`). The loser
//! has a duty: a server that lost to a cancel gives its units back; an owner that
//! lost to a grant releases the units it will never take. A request of 0 units is
//! a drain waiter: the server grants it, taking nothing, once the semaphore is
//! closed and every unit is back.
//!
//! A cell has two phases before `WAITING`: `EMPTY` (its ticket is taken, or not
//! yet, and the request is not published) and `BROKEN` (the server passed an
//! unpublished cell; its owner takes another ticket).
//!
//! `REGISTERING` is the owner's claim on the waker cell while it swaps in a new
//! waker (a re-poll). A server that resolves the request while it is set leaves
//! the cell alone and keeps the bit; the owner, whose CAS back then fails, sees
//! the phase and needs no wake-up. So neither side waits for the other (the
//! futures crate's `AtomicWaker`, folded into the phase word).
//!
//! # Who touches the waker
//!
//! The owner before the request is published; then whoever holds `REGISTERING`
//! (the owner) or won the phase CAS (the server, or the owner by its cancel).

use core::task::Waker;

use crate::loom::sync::{AtomicUsize, Ordering, UnsafeCell};
use crate::safeguard::Safeguard;

/// Values and bits of the status word.
pub(crate) mod status {
    /// Published: waiting for units.
    pub(crate) const WAITING: usize = 0;
    /// The server took the units for it; its owner now owns them.
    pub(crate) const GRANTED: usize = 1;
    /// The server resolved it because the semaphore closed (its `CLOSED` flag).
    pub(crate) const SHUT_OUT: usize = 2;
    /// The owner gave up (its future was dropped while waiting).
    pub(crate) const CANCELLED: usize = 3;
    /// The server resolved it because the capacity fell below its request.
    pub(crate) const EXCEEDS: usize = 4;
    /// A cell not published yet (as a segment is born).
    #[cfg(feature = "alloc")]
    pub(crate) const EMPTY: usize = 5;
    /// A cell the server passed before it was published.
    #[cfg(feature = "alloc")]
    pub(crate) const BROKEN: usize = 6;
    /// The server resolved it because a shed asked for requests of its rank
    /// (`shedding.rs`).
    #[cfg(feature = "alloc")]
    pub(crate) const SHED: usize = 7;
    /// Mask of the phase.
    pub(crate) const PHASE: usize = 7;
    /// The owner is swapping the waker.
    pub(crate) const REGISTERING: usize = 1 << 3;
}

/// Which waker a request registered, by the two parts [`Waker::will_wake`]
/// compares (its data pointer and vtable, as addresses): equal ids wake the same
/// task. The registered waker is a clone that keeps its data alive, so the
/// address cannot be reused by another waker meanwhile.
#[cfg(feature = "alloc")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WakerId {
    data: usize,
    vtable: usize,
}

#[cfg(feature = "alloc")]
impl WakerId {
    /// No waker: unequal to every waker's id (no vtable is at address 0).
    pub(crate) const NONE: WakerId = WakerId { data: 0, vtable: 0 };

    pub(crate) fn of(waker: &Waker) -> WakerId {
        WakerId {
            data: waker.data().addr(),
            vtable: core::ptr::from_ref(waker.vtable()).addr(),
        }
    }
}

/// A status word and the waker it guards.
pub(crate) struct WaitStatus {
    /// Phase and flags; see the module docs.
    word: AtomicUsize,
    /// # Safety
    /// See the module docs, "Who touches the waker".
    waker: UnsafeCell<Option<Waker>>,
}

impl WaitStatus {
    pub(crate) fn new(word: usize) -> WaitStatus {
        WaitStatus {
            word: AtomicUsize::new(word),
            waker: UnsafeCell::new(None),
        }
    }

    /// Stores the first waker, before the request is published.
    ///
    /// # Safety
    /// The caller is the owner and the request is not published.
    pub(crate) unsafe fn set_waker(&self, waker: Option<Waker>) {
        // SAFETY: the caller's contract: nobody else touches the cell yet.
        self.waker.with_mut(|w| unsafe { *w = waker });
    }

    /// The phase, with `Acquire`: once it reads `GRANTED`, the owner sees the units
    /// handed over (the server's take and everything before it).
    #[inline]
    pub(crate) fn phase(&self) -> usize {
        self.word.load(Ordering::Acquire) & status::PHASE
    }

    /// The owner publishes its request in a cell: `EMPTY → WAITING`. `Release`:
    /// whoever reads `WAITING` with `Acquire` sees what the owner wrote before
    /// (its units and waker). `false`: the server broke the cell first.
    #[cfg(feature = "alloc")]
    pub(crate) fn publish(&self) -> bool {
        self.word
            .compare_exchange(
                status::EMPTY,
                status::WAITING,
                Ordering::Release,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// The server breaks a cell claimed but not published: `EMPTY → BROKEN`, so
    /// that its cursor can move on. `false`: published meanwhile.
    #[cfg(feature = "alloc")]
    pub(crate) fn break_unpublished(&self) -> bool {
        self.word
            .compare_exchange(
                status::EMPTY,
                status::BROKEN,
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// The owner's re-poll: swaps in `waker` unless the request was resolved, then
    /// returns the phase. A `WAITING` result means `waker` will be woken on
    /// resolution; any other is final.
    ///
    /// The clone is made before `REGISTERING` is taken (a waker clone is user code
    /// and may panic), and the waker it replaces is dropped after it is released.
    pub(crate) fn register(&self, waker: &Waker) -> usize {
        // `Acquire` on every read that may return a final phase (see `phase`).
        let phase = self.phase();
        if phase != status::WAITING {
            return phase;
        }
        let new = waker.clone();
        let current = match self.set_while_waiting(status::REGISTERING, Ordering::Acquire) {
            Ok(before) => before,
            Err(phase) => return phase,
        };
        // SAFETY: `REGISTERING` is ours and the phase was `WAITING`: a server that
        // resolves the request now keeps off the cell (module docs).
        // Always the swap: the clone is made already, so keeping an equivalent
        // old waker (`will_wake`) would save nothing.
        let unused = self.waker.with_mut(|w| unsafe { (*w).replace(new) });
        let registered = current | status::REGISTERING;
        let phase = match self.word.compare_exchange(
            registered,
            current,
            Ordering::Release,
            Ordering::Acquire,
        ) {
            Ok(_) => status::WAITING,
            Err(resolved) => {
                // Resolved while we held the cell: the server left the waker to us
                // and woke nobody; the phase is our answer.
                // SAFETY: the server did not touch the cell (it saw REGISTERING),
                // and nobody else registers.
                let mine = self.waker.with_mut(|w| unsafe { (*w).take() });
                self.word.fetch_and(!status::REGISTERING, Ordering::Relaxed);
                drop(mine);
                if !Safeguard::Registering.on() {
                    return status::WAITING;
                }
                resolved & status::PHASE
            }
        };
        drop(unused);
        phase
    }

    /// Server only: moves the phase from `WAITING` to `to` (`GRANTED`, `SHUT_OUT`,
    /// `EXCEEDS` or `SHED`). `None` if the owner cancelled first; otherwise the waker to
    /// wake, which is `None` if the owner was registering (it sees the phase
    /// itself).
    ///
    /// `AcqRel`: `Release` hands the taken units to the owner's `Acquire` load of
    /// the phase; `Acquire` reads the owner's last waker store, published by its
    /// `Release` CAS out of `REGISTERING`.
    pub(crate) fn resolve(&self, to: usize) -> Option<Option<Waker>> {
        #[cfg(feature = "alloc")]
        debug_assert!(matches!(
            to,
            status::GRANTED | status::SHUT_OUT | status::EXCEEDS | status::SHED
        ));
        #[cfg(not(feature = "alloc"))]
        debug_assert!(matches!(
            to,
            status::GRANTED | status::SHUT_OUT | status::EXCEEDS
        ));
        let waited = if Safeguard::PhaseCas.on() {
            self.set_while_waiting(to, Ordering::AcqRel)
        } else {
            // A blind store, read as a CAS that found the request waiting.
            self.word.store(to, Ordering::Release);
            Ok(status::WAITING)
        };
        match waited {
            Err(_) => None,
            Ok(before) if before & status::REGISTERING != 0 => Some(None),
            // SAFETY: the phase is no longer `WAITING` and `REGISTERING` was
            // clear, so the owner can no longer claim the cell: it is ours.
            Ok(_) => Some(self.waker.with_mut(|w| unsafe { (*w).take() })),
        }
    }

    /// The owner's cancel: moves the phase from `WAITING` to `CANCELLED`. Returns
    /// the phase it found; `WAITING` means the cancel won, and the owner now owns
    /// the waker cell.
    pub(crate) fn cancel(&self) -> usize {
        match self.set_while_waiting(status::CANCELLED, Ordering::AcqRel) {
            Ok(_) => status::WAITING,
            Err(phase) => phase,
        }
    }

    /// Sets `bits` by a CAS while the phase is `WAITING` (with `success` as the
    /// CAS's ordering): `Ok` with the word before, or `Err` with the phase found.
    /// Every read is `Acquire` (see `phase`).
    fn set_while_waiting(&self, bits: usize, success: Ordering) -> Result<usize, usize> {
        let mut current = self.word.load(Ordering::Acquire);
        loop {
            if current & status::PHASE != status::WAITING {
                return Err(current & status::PHASE);
            }
            match self.word.compare_exchange_weak(
                current,
                current | bits,
                success,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(current),
                Err(actual) => current = actual,
            }
        }
    }

    /// The owner takes its waker back: after its cancel won, to drop it outside
    /// any server work; from a cell the server broke before it was published;
    /// or from a node no server can reach any more.
    ///
    /// # Safety
    /// [`cancel`](Self::cancel) returned `WAITING` to this caller, or the caller
    /// owns the unpublished cell, or no server can reach the request.
    #[inline]
    pub(crate) unsafe fn take_waker(&self) -> Option<Waker> {
        // SAFETY: the phase is `CANCELLED` (or the request was never published),
        // so the server's resolve fails and never touches the cell; the owner is
        // the only other party.
        self.waker.with_mut(|w| unsafe { (*w).take() })
    }
}
