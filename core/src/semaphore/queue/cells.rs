//! The wait queue with `alloc`: each parked request is a [`Cell`] of the
//! segment list (`segments/`), in ticket order, and the server (the role holder,
//! `serving.rs`) walks the cells with the list's cursor.
//!
//! - **Enqueue**: claim a ticket, write the units and the waker into its cell,
//!   publish it (`EMPTY → WAITING`, one CAS); its owner then joins in the state
//!   word. A parker whose cell the server broke meanwhile (`EMPTY → BROKEN`)
//!   has not arrived: it lets go of that ticket and claims another.
//! - **Re-poll**: with the waker the cell holds (the owner remembers which, in
//!   a field only it touches), read the phase; with another, register it
//!   (`wait_status.rs`).
//! - **Cancel**: the cell's phase `WAITING → CANCELLED` (one CAS), then the
//!   ticket goes back to the list, counted as cancelled (the cancel that
//!   completes a segment removes it): nothing for a server to unlink or free.
//! - **Serve**: at the cursor, skip what is done (cancelled, broken, resolved by
//!   a close or a sweep), grant the head while it fits, and stop at a head that
//!   does not fit, at the end, or at a cell claimed but not published while no
//!   unit is free. While units are free such a cell is broken instead: a
//!   descheduled parker must not hold up the requests behind it.
//!
//! # Invariants
//!
//! 1. **Ticket order.** Arrival order is ticket order: a request's cell is
//!    published before it joins, and only the cell at the cursor is granted
//!    (FIFO). This is how the cells keep `queue/` invariant *arrival order*.
//! 2. **Published or broken once.** A cell leaves `EMPTY` once: published by its
//!    owner or broken by the server, by CAS; a broken cell's owner never joined,
//!    so no arrival is lost.
//! 3. **Resolved once, returned once.** A published cell leaves `WAITING` once
//!    (`wait_status.rs`); its ticket goes back to the list once, after that: by
//!    the cancel that won (counted as cancelled), or by the owner once it has
//!    read a final phase.
//! 4. **No lost wake-up at a stop.** A server stops only at a head the pass's
//!    rule refuses (a won cancel of it is counted out by a read-modify-write of
//!    the state word, so either the server sees the cancel or the canceller sees
//!    the units the server saw free, and serves: `State::cancel_count_out`), or
//!    at an unpublished cell with no unit free (its owner joins after
//!    publishing, and a release after that join serves). This is how the cells
//!    keep `queue/` invariant *a stop that loses nothing*.

use core::pin::Pin;
use core::task::Waker;

use super::segments::{SegmentCell, Segments, Ticket};
use super::{Cancel, Queue, Stop};
use crate::loom::loom_const_fn;
use crate::loom::sync::UnsafeCell;
use crate::safeguard::Safeguard;
use crate::semaphore::shedding::{Shedding, RANKS};
use crate::semaphore::state::{available, State, CLOSED};
use crate::semaphore::wait_status::{status, WaitStatus, WakerId};
use crate::semaphore::wake_list::WakeList;

/// The cells, in ticket order; the serving role guards the list's cursor.
pub(crate) struct CellQueue {
    pub(crate) segments: Segments<Cell>,
}

/// One parked request's place, on a cache line of its own: consecutive tickets
/// go to parkers running at the same time, and two cells on one line would have
/// each one's publish, re-poll and cancel take the line from the other
/// (docs/design.md, "Layout").
#[repr(align(64))]
pub(crate) struct Cell {
    /// The request's phase and waker (`EMPTY` at birth).
    status: WaitStatus,
    /// The units asked for, written by the ticket holder before it publishes.
    units: UnsafeCell<usize>,
    /// The request's rank (`shedding.rs`), written with the units.
    rank: UnsafeCell<u8>,
    /// Which waker the cell holds, kept by the ticket holder alone (the server
    /// never touches it): a re-poll with an equivalent waker registers nothing.
    registered: UnsafeCell<WakerId>,
}

impl SegmentCell for Cell {
    fn fresh() -> Cell {
        Cell {
            status: WaitStatus::new(status::EMPTY),
            units: UnsafeCell::new(0),
            rank: UnsafeCell::new(0),
            registered: UnsafeCell::new(WakerId::NONE),
        }
    }
}

// SAFETY: the status word is atomic, and the waker beside it is touched by the
// rules of `wait_status.rs`; `units` and `rank` are written by the ticket holder
// before it publishes the cell (`Release`), and read only after an `Acquire`
// read of a published phase; `registered` is the ticket holder's alone.
unsafe impl Sync for Cell {}

// The block the segment list is sized for: 31 cells of one line each and the
// segment's header on one more fill 2 KiB (the crate's tests add a quarantine;
// the loom build's atomics are larger).
#[cfg(not(test))]
const _: () = assert!(cfg!(admit_loom) || super::segments::fills_one_block::<Cell>());

/// What an acquire future holds of its parked request: its ticket.
#[derive(Debug)]
pub(crate) struct Slot {
    ticket: Option<Ticket<Cell>>,
}

impl Slot {
    #[inline]
    pub(crate) const fn new(_units: usize) -> Slot {
        Slot { ticket: None }
    }

    fn cell(&self) -> &Cell {
        self.ticket.as_ref().expect("parked").cell()
    }
}

impl CellQueue {
    loom_const_fn! {
        pub(crate) fn new() -> CellQueue {
            CellQueue {
                segments: Segments::new(),
            }
        }
    }
}

impl CellQueue {
    /// Resolves `cell` with `outcome` (which took no units), and counts it out
    /// and queues its waker if that won over a cancel. Returns whether it won.
    fn resolve_untaken(
        &self,
        state: &State,
        cell: &Cell,
        outcome: usize,
        wakers: &mut WakeList,
    ) -> bool {
        match cell.status.resolve(outcome) {
            Some(waker) => {
                state.count_out();
                wakers.push(waker);
                true
            }
            // The owner cancelled first; its cancel gives the ticket back.
            None => false,
        }
    }

    /// As [`resolve_untaken`](Self::resolve_untaken); a grant that lost to a
    /// cancel gives back the units it took.
    fn resolve(
        &self,
        state: &State,
        cell: &Cell,
        units: usize,
        outcome: usize,
        wakers: &mut WakeList,
    ) {
        let won = self.resolve_untaken(state, cell, outcome, wakers);
        if !won && outcome == status::GRANTED && units != 0 && Safeguard::GrantGivesBack.on() {
            state.give_back(units);
        }
    }

    /// The cell at the cursor, or why a walk stops there: a full wake batch,
    /// or nothing left.
    ///
    /// # Safety
    /// The caller holds the role, and keeps the cell only until it advances.
    unsafe fn at_cursor(&self, wakers: &WakeList) -> Result<&Cell, Stop> {
        if wakers.is_full() {
            return Err(Stop::BatchFull);
        }
        // SAFETY: the caller's.
        unsafe { self.segments.current() }.ok_or(Stop::Empty)
    }
}

/// The units of a published cell.
///
/// # Safety
/// The caller read the cell's phase with `Acquire` after it was published.
unsafe fn units_of(cell: &Cell) -> usize {
    // SAFETY: written before the `Release` publish, never again.
    cell.units.with(|u| unsafe { *u })
}

/// The rank of a published cell.
///
/// # Safety
/// As for [`units_of`].
unsafe fn rank_of(cell: &Cell) -> usize {
    // SAFETY: as for `units_of`.
    usize::from(cell.rank.with(|r| unsafe { *r }))
}

impl Queue for CellQueue {
    type Slot = Slot;

    /// Publishes the request in a cell of its own ticket.
    #[inline]
    fn enqueue<'s>(
        &self,
        slot: Pin<&'s mut Slot>,
        units: usize,
        rank: u8,
        waker: Waker,
    ) -> &'s WaitStatus {
        let id = WakerId::of(&waker);
        let mut waker = Some(waker);
        let ticket = loop {
            let ticket = self.segments.claim();
            let cell = ticket.cell();
            // SAFETY: the cell is `EMPTY` and the ticket ours: nobody else
            // touches its units or its waker until it is published.
            cell.units.with_mut(|u| unsafe { *u = units });
            // SAFETY: as above.
            cell.rank.with_mut(|r| unsafe { *r = rank });
            // SAFETY: as above.
            unsafe { cell.status.set_waker(waker.take()) };
            // SAFETY: the ticket holder's alone.
            cell.registered.with_mut(|r| unsafe { *r = id });
            // `Release`: the server's `Acquire` read of `WAITING` sees the units
            // and the waker.
            if cell.status.publish() {
                break ticket;
            }
            // Broken by a server: this arrival never happened. Take another.
            // SAFETY: never published, so the cell is still ours.
            waker = unsafe { cell.status.take_waker() };
            self.segments.return_ticket(ticket);
        };
        // `Slot` is `Unpin`: the ticket names the cell, which never moves.
        &slot.get_mut().ticket.insert(ticket).cell().status
    }

    /// A re-poll of a parked request: its phase, with `waker` registered if it
    /// is still waiting. If the cell holds an equivalent waker already (the same
    /// task polling again), one load: no clone, nothing written.
    #[inline]
    fn repoll(slot: &Slot, waker: &Waker) -> usize {
        let cell = slot.cell();
        let id = WakerId::of(waker);
        // SAFETY: the ticket holder's alone, and `slot` is the holder's.
        if cell.registered.with(|r| unsafe { *r }) == id {
            return cell.status.phase();
        }
        let phase = cell.status.register(waker);
        if phase == status::WAITING {
            // SAFETY: as above.
            cell.registered.with_mut(|r| unsafe { *r = id });
        }
        phase
    }

    /// The owner has read its request's final phase: the ticket goes back.
    #[inline]
    fn finish(&self, slot: Pin<&mut Slot>) {
        if let Some(ticket) = slot.get_mut().ticket.take() {
            self.segments.return_ticket(ticket);
        }
    }

    /// The cell's phase `WAITING → CANCELLED`; the ticket goes back, counted
    /// as cancelled if that won.
    #[inline]
    fn cancel(&self, slot: Pin<&mut Slot>) -> Cancel {
        let ticket = slot.get_mut().ticket.take().expect("parked");
        let cell = ticket.cell();
        match cell.status.cancel() {
            status::WAITING => {
                // SAFETY: our cancel won.
                let waker = unsafe { cell.status.take_waker() };
                self.segments.cancel(ticket);
                Cancel::Won(waker)
            }
            phase => {
                self.segments.return_ticket(ticket);
                Cancel::Lost(phase)
            }
        }
    }

    #[inline]
    unsafe fn resolve_every(
        &self,
        state: &State,
        outcome: usize,
        wakers: &mut WakeList,
        matches: impl Fn(usize) -> bool,
    ) -> bool {
        let mut done = true;
        // SAFETY: the caller's role; no cell is kept.
        unsafe {
            self.segments.scan(|cell| {
                // SAFETY: read with `Acquire`, published.
                if cell.status.phase() == status::WAITING && matches(units_of(cell)) {
                    if wakers.is_full() {
                        done = false;
                        return false;
                    }
                    self.resolve_untaken(state, cell, outcome, wakers);
                }
                true
            });
        }
        done
    }

    unsafe fn shed(
        &self,
        state: &State,
        shedding: &Shedding,
        wakers: &mut WakeList,
    ) -> Option<usize> {
        let mut shed = 0;
        for rank in 0..RANKS {
            let mut owed = shedding.take(rank);
            let mut full = false;
            // SAFETY: the caller holds the role; no cell is kept.
            unsafe {
                self.segments.scan(|cell| {
                    if owed == 0 {
                        return false;
                    }
                    // SAFETY: the rank and units are read after an `Acquire` read
                    // of a published phase.
                    if cell.status.phase() == status::WAITING && rank_of(cell) == rank {
                        if wakers.is_full() {
                            full = true;
                            return false;
                        }
                        let units = units_of(cell);
                        // Before the CAS its owner's read of `SHED` follows.
                        let early = Safeguard::DoomBeforeShed.on();
                        if early {
                            shedding.doom(rank, units);
                        }
                        if self.resolve_untaken(state, cell, status::SHED, wakers) {
                            if !early {
                                shedding.doom(rank, units);
                            }
                            owed = owed.saturating_sub(units);
                            shed += units;
                        } else if early {
                            shedding.settle(rank, units);
                        }
                    }
                    true
                });
            }
            if full {
                shedding.put_back(rank, owed);
                return None;
            }
        }
        Some(shed)
    }

    #[inline]
    unsafe fn close(&self, state: &State, drained: bool, wakers: &mut WakeList) -> Stop {
        // Move the cursor past everything that can be answered now.
        loop {
            // SAFETY: the caller holds the role.
            let cell = match unsafe { self.at_cursor(wakers) } {
                Ok(cell) => cell,
                Err(stop) => return stop,
            };
            match cell.status.phase() {
                status::EMPTY if !cell.status.break_unpublished() => continue,
                status::WAITING => {
                    // SAFETY: read with `Acquire`, published.
                    let units = unsafe { units_of(cell) };
                    if units != 0 {
                        self.resolve_untaken(state, cell, status::SHUT_OUT, wakers);
                    } else if drained {
                        // A drain waiter takes no units.
                        self.resolve_untaken(state, cell, status::GRANTED, wakers);
                    } else {
                        break;
                    }
                }
                _ => {}
            }
            // SAFETY: the caller holds the role; `cell` is not used again.
            unsafe { self.segments.advance() };
        }
        // A drain waiter at the cursor waits for units: close the requests
        // behind it; the queue stays blocked on it.
        // SAFETY: the caller holds the role.
        if unsafe { self.resolve_every(state, status::SHUT_OUT, wakers, |units| units != 0) } {
            Stop::Blocked
        } else {
            Stop::BatchFull
        }
    }

    #[inline]
    unsafe fn grant_from_head(
        &self,
        state: &State,
        wakers: &mut WakeList,
        mut head: impl FnMut(usize) -> Result<usize, Stop>,
    ) -> Stop {
        loop {
            // SAFETY: the caller holds the role.
            let cell = match unsafe { self.at_cursor(wakers) } {
                Ok(cell) => cell,
                Err(stop) => return stop,
            };
            match cell.status.phase() {
                status::WAITING => {
                    // SAFETY: read with `Acquire`, published.
                    let units = unsafe { units_of(cell) };
                    match head(units) {
                        Ok(outcome) => self.resolve(state, cell, units, outcome, wakers),
                        Err(stop) => return stop,
                    }
                }
                status::EMPTY => {
                    let now = state.load();
                    let stuck = available(now) == 0 && now & CLOSED == 0;
                    if stuck || !Safeguard::BreakUnpublished.on() {
                        // Its owner joins after publishing, and a release after
                        // that serves.
                        return Stop::Blocked;
                    }
                    if !cell.status.break_unpublished() {
                        continue; // published meanwhile
                    }
                }
                // Cancelled, broken, or resolved by a close or a sweep.
                _ => {}
            }
            // SAFETY: the caller holds the role; `cell` is not used again.
            unsafe { self.segments.advance() };
        }
    }
}
