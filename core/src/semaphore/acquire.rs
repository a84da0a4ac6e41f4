//! The acquire futures. Both are a handle on the semaphore plus a [`Request`]: the
//! units asked for, where the request is in its life, and its node once parked.

use core::fmt;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

use super::error::{AcquireError, Refusal};
use super::permit::Permit;
use super::Slot;
use super::{Semaphore, TryAcquireError};

/// The rank of a request nobody sheds: every request but a gate's.
#[cfg(feature = "alloc")]
use super::shedding::UNSHEDDABLE;
#[cfg(not(feature = "alloc"))]
const UNSHEDDABLE: u8 = 0;

/// Where a request is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// Not polled yet: it holds nothing.
    Idle,
    /// Its request is queued (or was, and is resolved but not yet seen).
    Parked,
    /// It returned its output.
    Done,
}

/// The part of an acquire future that does not depend on how it holds the
/// semaphore.
pub(crate) struct Request {
    units: usize,
    stage: Stage,
    /// Its rank, should it park (`shedding.rs`).
    rank: u8,
    /// Structurally pinned: without `alloc` the node lives here.
    slot: Slot,
}

impl Request {
    #[inline]
    pub(crate) fn new(units: usize) -> Self {
        Self::ranked(units, UNSHEDDABLE)
    }

    /// A request that, parked, may be shed with the requests of `rank`.
    #[inline]
    pub(crate) fn ranked(units: usize, rank: u8) -> Self {
        Self {
            units,
            stage: Stage::Idle,
            rank,
            slot: Slot::new(units),
        }
    }

    #[inline]
    pub(crate) fn units(&self) -> usize {
        self.units
    }

    /// The first poll's try: one CAS for a request; for a drain (0 units), whether
    /// every unit is back.
    #[inline]
    fn fast_path(semaphore: &Semaphore, units: usize) -> Result<(), TryAcquireError> {
        if units != 0 {
            semaphore.try_take(units)
        } else if semaphore.all_units_back() {
            Ok(())
        } else {
            Err(TryAcquireError::NoUnits)
        }
    }

    /// Polls the request against `semaphore`, which must be the same on every call.
    ///
    /// Inlined into the future's `poll`: a first poll that is granted at once is
    /// the fast path's one CAS and nothing else; everything else is out of line.
    #[inline(always)]
    pub(crate) fn poll(
        self: Pin<&mut Self>,
        semaphore: &Semaphore,
        cx: &Context<'_>,
    ) -> Poll<Result<(), Refusal>> {
        // SAFETY: `slot` is only ever used pinned (in `refused`), the other fields
        // are plain data, and nothing is moved out.
        let this = unsafe { self.get_unchecked_mut() };
        let poll = match this.stage {
            Stage::Idle => match Self::fast_path(semaphore, this.units) {
                Ok(()) => Poll::Ready(Ok(())),
                Err(refusal) => {
                    // SAFETY: `this` came from a pin and is not moved.
                    unsafe { Pin::new_unchecked(&mut *this) }.refused(semaphore, refusal, cx)
                }
            },
            Stage::Parked => {
                // SAFETY: `this` came from a pin and is not moved.
                unsafe { Pin::new_unchecked(&mut *this) }.repoll(semaphore, cx)
            }
            Stage::Done => panic!("an acquire future polled after completion"),
        };
        if poll.is_ready() {
            this.stage = Stage::Done;
        }
        poll
    }

    /// A first poll the fast path refused: fails at once, or parks.
    #[inline(never)]
    fn refused(
        self: Pin<&mut Self>,
        semaphore: &Semaphore,
        refusal: TryAcquireError,
        cx: &Context<'_>,
    ) -> Poll<Result<(), Refusal>> {
        // SAFETY: as in `poll`.
        let this = unsafe { self.get_unchecked_mut() };
        match refusal {
            TryAcquireError::Closed => Poll::Ready(Err(Refusal::Error(AcquireError::Closed))),
            TryAcquireError::ExceedsCapacity(e) => {
                Poll::Ready(Err(Refusal::Error(AcquireError::ExceedsCapacity(e))))
            }
            TryAcquireError::NoUnits => {
                // A waker clone is user code: made before anything is shared.
                let waker = cx.waker().clone();
                // SAFETY: `slot` is structurally pinned: `this` came from a pin.
                let slot = unsafe { Pin::new_unchecked(&mut this.slot) };
                this.stage = Stage::Parked;
                let phase = semaphore.park(slot, this.units, this.rank, waker);
                // SAFETY: as above.
                unsafe { Pin::new_unchecked(this) }.seen(semaphore, phase)
            }
        }
    }

    /// A re-poll of a parked request.
    #[inline(never)]
    fn repoll(
        self: Pin<&mut Self>,
        semaphore: &Semaphore,
        cx: &Context<'_>,
    ) -> Poll<Result<(), Refusal>> {
        // SAFETY: as in `poll`.
        let this = unsafe { self.get_unchecked_mut() };
        let phase = semaphore.repoll(&this.slot, cx.waker());
        // SAFETY: `this` came from a pin and is not moved.
        unsafe { Pin::new_unchecked(this) }.seen(semaphore, phase)
    }

    /// The owner has read `phase`: its outcome, and once it is final the
    /// request lets go of its place in the queue.
    fn seen(
        self: Pin<&mut Self>,
        semaphore: &Semaphore,
        phase: usize,
    ) -> Poll<Result<(), Refusal>> {
        // SAFETY: as in `poll`.
        let this = unsafe { self.get_unchecked_mut() };
        let outcome = semaphore.outcome(phase, this.units, this.rank);
        if outcome.is_ready() {
            // SAFETY: `slot` is structurally pinned: `this` came from a pin.
            semaphore.finish(unsafe { Pin::new_unchecked(&mut this.slot) });
        }
        outcome
    }

    /// Called from the future's `Drop`: gives back whatever the request holds.
    #[inline]
    pub(crate) fn cancel(self: Pin<&mut Self>, semaphore: &Semaphore) {
        // SAFETY: `slot` is structurally pinned, as in `poll`; nothing is moved.
        let this = unsafe { self.get_unchecked_mut() };
        if this.stage == Stage::Parked {
            // SAFETY: as above.
            semaphore.cancel(
                unsafe { Pin::new_unchecked(&mut this.slot) },
                this.units,
                this.rank,
            );
        }
    }
}

/// The future of [`Semaphore::acquire`].
///
/// # Cancel safety
///
/// Dropping it at any point returns every unit it took and leaves the queue whole.
#[must_use = "futures do nothing unless polled"]
pub struct Acquire<'a> {
    semaphore: &'a Semaphore,
    request: Request,
}

impl<'a> Acquire<'a> {
    #[inline]
    pub(crate) fn new(semaphore: &'a Semaphore, units: usize) -> Self {
        Self {
            semaphore,
            request: Request::new(units),
        }
    }
}

impl<'a> Future for Acquire<'a> {
    type Output = Result<Permit<'a>, AcquireError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: `request` is structurally pinned; it is never moved out.
        let this = unsafe { self.get_unchecked_mut() };
        let semaphore = this.semaphore;
        // SAFETY: as above.
        let request = unsafe { Pin::new_unchecked(&mut this.request) };
        let units = request.units();
        request.poll(semaphore, cx).map(|r| {
            r.map(|()| Permit::new(semaphore, units))
                .map_err(Refusal::unshed)
        })
    }
}

impl Drop for Acquire<'_> {
    #[inline]
    fn drop(&mut self) {
        // SAFETY: a future's drop is its last use: the request is dropped in place
        // right after, never moved (the pinned-drop guarantee).
        unsafe { Pin::new_unchecked(&mut self.request) }.cancel(self.semaphore);
    }
}

impl fmt::Debug for Acquire<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Acquire")
            .field("units", &self.request.units)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "alloc")]
pub use owned::AcquireOwned;
#[cfg(feature = "alloc")]
pub(crate) use owned::RankedAcquire;

#[cfg(feature = "alloc")]
mod owned {
    use alloc::sync::Arc;
    use core::fmt;
    use core::future::Future;
    use core::pin::Pin;
    use core::task::{Context, Poll};

    use super::Request;
    use crate::semaphore::error::{AcquireError, Refusal};
    use crate::semaphore::permit::OwnedPermit;
    use crate::Semaphore;

    /// The future of [`Semaphore::acquire_owned`].
    ///
    /// # Cancel safety
    ///
    /// Dropping it at any point returns every unit it took and leaves the queue whole.
    #[must_use = "futures do nothing unless polled"]
    pub struct AcquireOwned {
        semaphore: Arc<Semaphore>,
        request: Request,
    }

    impl Future for AcquireOwned {
        type Output = Result<OwnedPermit, AcquireError>;

        #[inline]
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            // SAFETY: `request` is structurally pinned; it is never moved out.
            let this = unsafe { self.get_unchecked_mut() };
            // SAFETY: as above.
            let request = unsafe { Pin::new_unchecked(&mut this.request) };
            let units = request.units();
            request.poll(&this.semaphore, cx).map(|r| {
                r.map(|()| OwnedPermit::new(Arc::clone(&this.semaphore), units))
                    .map_err(Refusal::unshed)
            })
        }
    }

    /// The future of [`Semaphore::acquire_ranked`]: an [`AcquireOwned`] whose
    /// parked request may be shed ([`Refusal::Shed`]).
    pub(crate) struct RankedAcquire {
        semaphore: Arc<Semaphore>,
        request: Request,
    }

    impl Future for RankedAcquire {
        type Output = Result<OwnedPermit, Refusal>;

        #[inline]
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
            // SAFETY: `request` is structurally pinned; it is never moved out.
            let this = unsafe { self.get_unchecked_mut() };
            // SAFETY: as above.
            let request = unsafe { Pin::new_unchecked(&mut this.request) };
            let units = request.units();
            request
                .poll(&this.semaphore, cx)
                .map(|r| r.map(|()| OwnedPermit::new(Arc::clone(&this.semaphore), units)))
        }
    }

    impl Drop for RankedAcquire {
        #[inline]
        fn drop(&mut self) {
            // SAFETY: as for `AcquireOwned`.
            unsafe { Pin::new_unchecked(&mut self.request) }.cancel(&self.semaphore);
        }
    }

    impl Drop for AcquireOwned {
        #[inline]
        fn drop(&mut self) {
            // SAFETY: a future's drop is its last use: the request is dropped in
            // place right after, never moved (the pinned-drop guarantee).
            unsafe { Pin::new_unchecked(&mut self.request) }.cancel(&self.semaphore);
        }
    }

    impl fmt::Debug for AcquireOwned {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.debug_struct("AcquireOwned")
                .field("units", &self.request.units)
                .finish_non_exhaustive()
        }
    }

    impl Semaphore {
        /// [`acquire`](Semaphore::acquire) with a `'static` permit.
        ///
        /// # Cancel safety
        ///
        /// As for [`acquire`](Semaphore::acquire).
        ///
        /// # Errors
        ///
        /// As for [`acquire`](Semaphore::acquire).
        ///
        /// # Panics
        ///
        /// If `units == 0`.
        #[inline]
        pub fn acquire_owned(self: Arc<Self>, units: usize) -> AcquireOwned {
            crate::semaphore::assert_nonzero(units);
            AcquireOwned {
                semaphore: self,
                request: Request::new(units),
            }
        }

        /// [`acquire_owned`](Self::acquire_owned) for a request that, parked,
        /// may be shed with the requests of `rank` ([`Semaphore::shed`]).
        #[inline]
        pub(crate) fn acquire_ranked(self: Arc<Self>, units: usize, rank: u8) -> RankedAcquire {
            crate::semaphore::assert_nonzero(units);
            RankedAcquire {
                semaphore: self,
                request: Request::ranked(units, rank),
            }
        }

        /// [`try_acquire`](Semaphore::try_acquire) with a `'static` permit.
        ///
        /// # Errors
        ///
        /// As for [`try_acquire`](Semaphore::try_acquire).
        ///
        /// # Panics
        ///
        /// If `units == 0`.
        #[inline]
        pub fn try_acquire_owned(
            self: Arc<Self>,
            units: usize,
        ) -> Result<OwnedPermit, crate::TryAcquireError> {
            self.try_take(units)?;
            Ok(OwnedPermit::new(self, units))
        }
    }
}
