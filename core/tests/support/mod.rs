//! Shared test helpers: a manual clock and a recording observer.
#![allow(dead_code, unused_imports, unreachable_pub, missing_docs)]

pub mod manual_timer;
pub mod recorder;
pub mod signal;
pub mod spawning_timer;

pub use manual_timer::ManualTimer;
pub use recorder::{Event, Recorder};
pub use signal::Trigger;
pub use spawning_timer::SpawningTimer;

admit::sources! {
    /// Call sites used by the gate tests.
    pub enum Src {
        Upload => "upload",
        Publish => "publish",
        Mirror => "mirror",
    }
}
