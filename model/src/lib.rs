//! Reference models of `admit`'s contracts, and a deterministic replay of operation
//! sequences against the real types, through their public API only: the
//! [`semaphore`] model against [`admit::Semaphore`], the [`gate`] model against
//! [`admit::Gate`]. A replay panics at the first step where the real type and its
//! model disagree.
//!
//! Two users, one decoding: the cargo-fuzz targets `fuzz/fuzz_targets/semaphore_ops.rs`
//! and `gate_ops.rs` feed fuzzer bytes to [`semaphore::replay_bytes`] and
//! [`gate::replay_gate_bytes`], and `tests/corpus.rs` replays the committed corpus
//! (`fuzz/corpus/<target>/`), seeded sweeps and named cases through the same
//! functions on stable, so a corpus file means the same to both. Inputs decode
//! with [`arbitrary`].
//!
//! Not published. No `#[test]`s live in the library.

pub mod gate;
pub mod semaphore;

mod counting_waker;
mod overload;

// The gate model's manual clock and cancellation signal are core's test helpers,
// shared by path: core's tests cannot depend on this crate (its `admit` has `std`,
// which would reach every feature combination the core's tests are built in).
#[path = "../../core/tests/support/manual_timer.rs"]
pub mod manual_timer;
#[path = "../../core/tests/support/signal.rs"]
pub mod signal;
/// [`SpawningTimer`](spawning_timer::SpawningTimer): the gate model's clock,
/// which takes the memory watch's task.
#[path = "../../core/tests/support/spawning_timer.rs"]
pub mod spawning_timer;

/// The kind a selector byte picks from `table`: each kind owns as many of the 256
/// byte values as its weight, in the table's order (the weights sum to 256).
fn kind_of<K: Copy>(table: &[(K, u16)], selector: u8) -> K {
    let mut start = 0;
    for &(kind, weight) in table {
        start += weight;
        if u16::from(selector) < start {
            return kind;
        }
    }
    unreachable!("the selector weights cover every byte")
}

/// The first selector byte of `kind` in `table`: what [`kind_of`] reads back as it.
fn selector_of<K: Copy + PartialEq>(table: &[(K, u16)], kind: K) -> u8 {
    let mut start = 0;
    for &(k, weight) in table {
        if k == kind {
            return u8::try_from(start).expect("a byte");
        }
        start += weight;
    }
    unreachable!("every kind has a selector")
}

/// The index a raw byte picks among `len` things, or `None` if there are none.
fn pick(raw: u8, len: usize) -> Option<usize> {
    (len > 0).then(|| usize::from(raw) % len)
}
