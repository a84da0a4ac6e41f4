//! The README examples of the packaged crates, run as doctests by a dependent.
//!
//! Each module's docs are one README as it was packaged: `cargo test --doc` here
//! compiles and runs their examples against the `.crate` files, not the workspace.

#[doc = include_str!("../crates/admit/README.md")]
pub mod admit_readme {}
#[doc = include_str!("../crates/admit-async-std/README.md")]
pub mod admit_async_std_readme {}
#[doc = include_str!("../crates/admit-http/README.md")]
pub mod admit_http_readme {}
#[doc = include_str!("../crates/admit-metrics/README.md")]
pub mod admit_metrics_readme {}
#[doc = include_str!("../crates/admit-smol/README.md")]
pub mod admit_smol_readme {}
#[doc = include_str!("../crates/admit-tokio/README.md")]
pub mod admit_tokio_readme {}
#[doc = include_str!("../crates/admit-tower/README.md")]
pub mod admit_tower_readme {}
/// The repository's README: its quick start, as a newcomer copies it.
#[doc = include_str!("../README.md")]
pub mod repository_readme {}
