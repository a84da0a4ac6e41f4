//! What the crate's own loom models share (`support`). The models are unit tests
//! beside the private code they check, built only with
//! `RUSTFLAGS="--cfg admit_loom"` (`ci/loom.sh`): today the segment list's,
//! `semaphore/queue/segments/tests/loom.rs`. The models of the public API are the
//! `loom-tests` crate's; its README lists every model, these included.

// Test code that runs on std.
#![allow(clippy::std_instead_of_core, clippy::std_instead_of_alloc)]

pub(crate) mod support;
