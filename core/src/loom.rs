//! The one place the crate imports its synchronization primitives from.
//!
//! Under `--cfg admit_loom` every atomic, cell and spin hint comes from
//! [`loom`](https://docs.rs/loom), so the same code is model-checked; otherwise they
//! are `core`'s. Constructors are `const fn` only outside loom, whose atomics are not
//! const: [`loom_const_fn!`] writes both arms.

#[cfg(not(admit_loom))]
pub(crate) mod sync {
    pub(crate) use core::hint::spin_loop;
    pub(crate) use core::sync::atomic::{AtomicU8, AtomicUsize, Ordering};

    /// `core::cell::UnsafeCell` behind loom's closure-based API, so accesses read the
    /// same under both arms and loom can track each one.
    #[derive(Debug)]
    pub(crate) struct UnsafeCell<T>(core::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            Self(core::cell::UnsafeCell::new(value))
        }

        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

#[cfg(admit_loom)]
pub(crate) mod sync {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::hint::spin_loop;
    pub(crate) use loom::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
}

/// Declares a function that is `const` except under loom.
macro_rules! loom_const_fn {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty $body:block) => {
        $(#[$meta])*
        #[cfg(not(admit_loom))]
        $vis const fn $name($($arg: $ty),*) -> $ret $body

        $(#[$meta])*
        #[cfg(admit_loom)]
        $vis fn $name($($arg: $ty),*) -> $ret $body
    };
}
pub(crate) use loom_const_fn;
