//! `admit`'s semaphore measured against its peers in one run (issue 5).
//!
//! ```text
//! cargo bench -p admit-benches            # the recorded run, ~1 minute on 2 cores
//! cargo bench -p admit-benches -- --scenario S1 --peer admit --peer tokio
//! ```
//!
//! - [`peer`]: the [`Peer`](peer::Peer) trait and one adapter per semaphore
//!   (admit, admit-owned, admit-compat, tokio, tokio-owned, async-lock, futures-intrusive,
//!   maitake-sync, async-weighted-semaphore, and a bare-atomic floor).
//! - [`scenario`]: S1–S13, written once, generic over the peer.
//! - [`report`]: medians, min/max and ratios as Markdown.
//! - [`heap`]: the global allocator, which counts the bytes live so the storms can
//!   report how far the heap grew.
//! - [`gate`]: what `admit::Gate` with the `admit-metrics` observer adds to an
//!   uncontended acquire + release.
//! - [`overload`]: the gate under overload, a simulation on virtual time against
//!   the fixed budget and tower (`cargo bench -p admit-benches --bench overload`,
//!   docs/overload.md).
//!
//! The harness (`benches/peers.rs`) interleaves repetitions round-robin across the
//! peers, so noise from a shared machine shifts every column alike. Results and
//! their reading are in `docs/benchmarks.md`.

pub mod gate;
pub mod heap;
pub mod overload;
pub mod peer;
pub mod report;
pub mod scenario;
