//! The one place the crate imports its synchronization primitives from.
//!
//! Three arms, chosen by cfg:
//!
//! - the default: `core`'s atomics and `alloc`'s `Arc`;
//! - `--cfg admit_loom` (the crate's own unit tests, and the library as the
//!   `loom-tests` crate builds it, with the test-only `__loom` feature):
//!   [`loom`](https://docs.rs/loom)'s, so the same code is model-checked
//!   exhaustively (loom also reports a leaked or double-freed allocation);
//! - `--cfg admit_shuttle` in the crate's own unit tests:
//!   [`shuttle`](https://docs.rs/shuttle)'s, so a randomized scheduler (PCT) can run
//!   schedules far longer than loom can enumerate.
//!
//! Constructors are `const fn` only outside loom, whose atomics are not const:
//! [`loom_const_fn!`] writes both arms.

#[cfg(not(any(admit_loom, all(test, admit_shuttle))))]
pub(crate) mod sync {
    pub(crate) use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    #[cfg(feature = "alloc")]
    pub(crate) use core::sync::atomic::{AtomicPtr, AtomicU32};

    pub(crate) use super::PlainCell as UnsafeCell;
}

#[cfg(admit_loom)]
pub(crate) mod sync {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    #[cfg(feature = "alloc")]
    pub(crate) use loom::sync::atomic::{AtomicPtr, AtomicU32};
}

#[cfg(all(test, admit_shuttle, not(admit_loom)))]
pub(crate) mod sync {
    pub(crate) use shuttle::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    #[cfg(feature = "alloc")]
    pub(crate) use shuttle::sync::atomic::{AtomicPtr, AtomicU32};

    // Shuttle schedules at atomic operations and has no cell of its own.
    pub(crate) use super::PlainCell as UnsafeCell;
}

/// Without `alloc`, the wait queue's lock: `critical-section`'s, held for a
/// bounded number of steps; under loom a loom mutex, so the models see every
/// interleaving of the sections. Never nested: a nested entry panics (the
/// `RefCell`, or loom's deadlock report).
#[cfg(all(not(feature = "alloc"), not(admit_loom)))]
pub(crate) struct CriticalSection<T>(critical_section::Mutex<core::cell::RefCell<T>>);

#[cfg(all(not(feature = "alloc"), not(admit_loom)))]
impl<T> CriticalSection<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self(critical_section::Mutex::new(core::cell::RefCell::new(
            value,
        )))
    }

    /// Runs `f` inside the critical section, with the guarded value.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        critical_section::with(|cs| f(&mut self.0.borrow_ref_mut(cs)))
    }
}

#[cfg(all(not(feature = "alloc"), admit_loom))]
pub(crate) struct CriticalSection<T>(loom::sync::Mutex<T>);

#[cfg(all(not(feature = "alloc"), admit_loom))]
impl<T> CriticalSection<T> {
    pub(crate) fn new(value: T) -> Self {
        Self(loom::sync::Mutex::new(value))
    }

    /// Runs `f` holding the mutex, with the guarded value.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        f(&mut self
            .0
            .lock()
            .expect("a model thread panicked in the section"))
    }
}

/// Raw allocation, for memory the crate frees itself (the wait queue's segments):
/// loom's tracked allocator under loom, which fails a model that leaks a block or
/// frees one twice; `alloc`'s otherwise.
#[cfg(all(feature = "alloc", not(admit_loom)))]
pub(crate) mod heap {
    pub(crate) use alloc::alloc::{alloc, dealloc, handle_alloc_error};
    pub(crate) use core::alloc::Layout;
}

#[cfg(all(feature = "alloc", admit_loom))]
pub(crate) mod heap {
    pub(crate) use alloc::alloc::handle_alloc_error;
    pub(crate) use loom::alloc::{alloc, dealloc, Layout};
}

/// `core::cell::UnsafeCell` behind loom's closure-based API, so accesses read the
/// same under every arm and loom can track each one.
#[cfg(not(admit_loom))]
#[derive(Debug)]
pub(crate) struct PlainCell<T>(core::cell::UnsafeCell<T>);

#[cfg(not(admit_loom))]
impl<T> PlainCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self(core::cell::UnsafeCell::new(value))
    }

    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// Declares a function that is `const` except under loom and shuttle.
macro_rules! loom_const_fn {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty $body:block) => {
        $(#[$meta])*
        #[cfg(not(any(admit_loom, all(test, admit_shuttle))))]
        $vis const fn $name($($arg: $ty),*) -> $ret $body

        $(#[$meta])*
        #[cfg(any(admit_loom, all(test, admit_shuttle)))]
        $vis fn $name($($arg: $ty),*) -> $ret $body
    };
}
pub(crate) use loom_const_fn;
