//! Loom models of `admit` live in `tests/`; this crate has no code of its own.
