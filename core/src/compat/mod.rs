//! tokio 1.x's `tokio::sync::Semaphore`, by name and signature, over admit's
//! [counting semaphore](crate::Semaphore::counting) (feature `tokio-compat`).
//!
//! A crate that uses tokio's semaphore ports by changing its `use` line; a
//! `static` made with `const_new` keeps its constructor:
//!
//! ```
//! // use tokio::sync::{AcquireError, Semaphore, SemaphorePermit, TryAcquireError};
//! use admit::compat::{AcquireError, Semaphore, SemaphorePermit, TryAcquireError};
//!
//! static POOL: Semaphore = Semaphore::const_new(0);
//!
//! # futures_lite::future::block_on(async {
//! POOL.add_permits(2); // two objects made
//! let two = POOL.acquire_many(2).await?;
//! assert_eq!(two.num_permits(), 2);
//! assert_eq!(POOL.try_acquire().err(), Some(TryAcquireError::NoPermits));
//! # Ok::<(), AcquireError>(())
//! # }).unwrap();
//! ```
//!
//! The rest behaves as tokio's: FIFO with head-of-line blocking, a request above
//! the permits waits for [`add_permits`](Semaphore::add_permits), zero permits
//! are granted at once unless closed, `Closed` comes before any other error.
//! The differences, each in the repository's `docs/from-tokio.md`:
//!
//! - [`MAX_PERMITS`](Semaphore::MAX_PERMITS) is 2²⁸ − 1, not `usize::MAX >> 3`,
//!   and it bounds the permits held and free together, where tokio's bounds the
//!   free ones.
//! - A parked request takes no permit until it can take all it asked for: the
//!   ones free meanwhile stay in [`available_permits`](Semaphore::available_permits)
//!   (tokio's parked request takes them as they come, and shows 0), though no
//!   request behind it gets them.
//!
//! tokio-util's `PollSemaphore` is here too, as [`PollSemaphore`], over an
//! `Arc` of this facade's semaphore, so a crate that shares one semaphore
//! between `acquire_owned` callers and a `PollSemaphore` ports by its `use`
//! lines as well ([`crate::PollSemaphore`] is the one over the core's).

mod error;
mod permit;
mod poll;
mod semaphore;

pub use error::{AcquireError, TryAcquireError};
pub use permit::{OwnedSemaphorePermit, SemaphorePermit};
pub use poll::PollSemaphore;
pub use semaphore::Semaphore;
