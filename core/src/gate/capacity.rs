//! A gate's capacity: a unit count given outright, or derived from a memory budget.
//!
//! Under feature `std`, [`process_memory_limit`](crate::process_memory_limit)
//! (`cgroup.rs`) reads the process's memory limit, so a server can size its gate
//! from the memory it actually has at start.

use core::fmt;

use crate::Semaphore;

/// How many units a [`Gate`] holds.
///
/// Either a unit count given outright (`usize` converts into it), or derived from a
/// memory budget with [`Capacity::from_memory_budget`]. The builder validates an
/// explicit count (it must be at least `max_units`) but *floors* a memory-derived
/// one at `max_units`: an operation that holds two units would wait forever on a
/// gate of one, and a small budget should still let the largest operation run.
///
/// # Examples
///
/// ```
/// use admit::Capacity;
///
/// // 1 GiB for 64 MiB staging buffers: 16 units.
/// let cap = Capacity::from_memory_budget(1 << 30, 64 << 20);
/// assert_eq!(cap.units(), 16);
/// assert!(cap.is_memory_derived());
/// assert_eq!(cap.bytes_per_unit(), Some(64 << 20));
///
/// let fixed = Capacity::from(8);
/// assert_eq!(fixed.units(), 8);
/// assert!(!fixed.is_memory_derived());
/// assert_eq!(fixed.bytes_per_unit(), None);
/// ```
#[doc = alloc_item_link!("Gate", "Gate", "struct.Gate.html")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Capacity {
    units: usize,
    /// The memory a unit stands for; 0 for an explicit count.
    bytes_per_unit: u64,
}

impl Capacity {
    /// `units` units, exactly. The builder rejects 0, values above
    /// [`Semaphore::MAX_UNITS`] and values below `max_units`.
    #[must_use]
    pub const fn units_exact(units: usize) -> Self {
        Self {
            units,
            bytes_per_unit: 0,
        }
    }

    /// As many units of `bytes_per_unit` as fit in `bytes`: `bytes / bytes_per_unit`,
    /// rounded down, saturating at [`Semaphore::MAX_UNITS`]. The builder raises the
    /// result to `max_units` if it is lower (including 0).
    ///
    /// # Panics
    ///
    /// If `bytes_per_unit == 0`: a unit that costs no memory cannot be budgeted.
    ///
    /// # Examples
    ///
    /// ```
    /// use admit::{Capacity, Semaphore};
    ///
    /// assert_eq!(Capacity::from_memory_budget(1000, 300).units(), 3); // rounded down
    /// assert_eq!(Capacity::from_memory_budget(u64::MAX, 1).units(), Semaphore::MAX_UNITS);
    /// ```
    #[must_use]
    pub const fn from_memory_budget(bytes: u64, bytes_per_unit: u64) -> Self {
        assert!(
            bytes_per_unit != 0,
            "Capacity::from_memory_budget: bytes_per_unit must be greater than zero"
        );
        let units = bytes / bytes_per_unit;
        let units = if units > Semaphore::MAX_UNITS as u64 {
            Semaphore::MAX_UNITS
        } else {
            // Lossless: `units <= MAX_UNITS < 2^30`.
            units as usize
        };
        Self {
            units,
            bytes_per_unit,
        }
    }

    /// The unit count: as given, or as derived from the memory budget (before the
    /// builder's `max_units` floor).
    #[must_use]
    pub const fn units(self) -> usize {
        self.units
    }

    /// Whether this capacity came from [`Capacity::from_memory_budget`], and so is
    /// floored at `max_units` by the builder rather than rejected.
    #[must_use]
    pub const fn is_memory_derived(self) -> bool {
        self.bytes_per_unit != 0
    }

    /// The memory a unit stands for, for a capacity from
    /// [`Capacity::from_memory_budget`]: what a gate's memory watch counts a
    /// unit in use as (see `MemoryWatch`).
    #[must_use]
    pub const fn bytes_per_unit(self) -> Option<u64> {
        if self.bytes_per_unit == 0 {
            None
        } else {
            Some(self.bytes_per_unit)
        }
    }

    /// The capacity a gate with this `max_units` gets: a memory-derived count is
    /// raised to `max_units`; an explicit one is returned as is (and validated by the
    /// builder).
    #[must_use]
    pub const fn floored(self, max_units: usize) -> usize {
        if self.is_memory_derived() && self.units < max_units {
            max_units
        } else {
            self.units
        }
    }
}

impl From<usize> for Capacity {
    fn from(units: usize) -> Self {
        Self::units_exact(units)
    }
}

impl fmt::Display for Capacity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_memory_derived() {
            write!(f, "{} units (from a memory budget)", self.units)
        } else {
            write!(f, "{} units", self.units)
        }
    }
}
