//! [`CachePadded`]: keeps an atomic that many threads write on a cache line of its
//! own, so that writes to one (a fast path's CAS on the state word) do not make
//! every other thread's access to another (a push onto a stack) miss.

use core::ops::Deref;

/// `T`, aligned (and so padded) to 128 bytes: two 64-byte lines, because x86's
/// adjacent-line prefetcher fetches lines in pairs.
#[repr(align(128))]
pub(crate) struct CachePadded<T>(T);

impl<T> CachePadded<T> {
    pub(crate) const fn new(value: T) -> Self {
        Self(value)
    }
}

impl<T> Deref for CachePadded<T> {
    type Target = T;

    #[inline(always)]
    fn deref(&self) -> &T {
        &self.0
    }
}
