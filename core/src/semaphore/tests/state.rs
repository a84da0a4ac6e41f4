//! The count of parked requests in the state word: it never touches the units or
//! the flags, and a request counted out before it was counted in (a server that
//! resolved it between its publish and its join) reads as nobody, not as a wrap.

use crate::semaphore::state::{available, HeadTake, State, MAX_UNITS, QUEUED};

#[test]
fn the_count_leaves_the_units_and_the_flags_alone() {
    let state = State::new(MAX_UNITS, false);
    for _ in 0..3 {
        state.join();
    }
    assert_eq!(state.waiters(), 3);
    assert_eq!(available(state.load()), MAX_UNITS);
    assert_ne!(state.load() & QUEUED, 0);

    assert_eq!(state.take_for_head(MAX_UNITS), HeadTake::Taken);
    assert_eq!(available(state.load()), 0);
    let before = state.cancel_count_out();
    assert_eq!(
        available(before),
        0,
        "the count's read of the word sees the units"
    );
    assert_eq!(state.waiters(), 2);
    state.release(MAX_UNITS);
    assert_eq!(available(state.load()), MAX_UNITS);
    assert_eq!(state.waiters(), 2);
}

#[test]
fn counted_out_before_it_was_counted_in_reads_as_nobody() {
    let state = State::new(2, false);
    state.count_out();
    assert_eq!(
        state.waiters(),
        0,
        "below zero reads as zero, not as a wrap"
    );
    assert_eq!(available(state.load()), 2);
    state.join();
    assert_eq!(state.waiters(), 0);
    state.join();
    assert_eq!(state.waiters(), 1);
    assert_eq!(available(state.load()), 2);
}
