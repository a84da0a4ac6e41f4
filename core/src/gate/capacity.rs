//! A gate's capacity: a unit count given outright, or derived from a memory budget.
//!
//! Under feature `std`, [`process_memory_limit`] reads the process's memory limit
//! from the cgroup filesystem, so a server can size its gate from the memory it
//! actually has at start.

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
///
/// let fixed = Capacity::from(8);
/// assert_eq!(fixed.units(), 8);
/// assert!(!fixed.is_memory_derived());
/// ```
#[doc = alloc_item_link!("Gate", "Gate", "struct.Gate.html")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Capacity {
    units: usize,
    memory_derived: bool,
}

impl Capacity {
    /// `units` units, exactly. The builder rejects 0, values above
    /// [`Semaphore::MAX_UNITS`] and values below `max_units`.
    #[must_use]
    pub const fn units_exact(units: usize) -> Self {
        Self {
            units,
            memory_derived: false,
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
            memory_derived: true,
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
        self.memory_derived
    }

    /// The capacity a gate with this `max_units` gets: a memory-derived count is
    /// raised to `max_units`; an explicit one is returned as is (and validated by the
    /// builder).
    #[must_use]
    pub const fn floored(self, max_units: usize) -> usize {
        if self.memory_derived && self.units < max_units {
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
        if self.memory_derived {
            write!(f, "{} units (from a memory budget)", self.units)
        } else {
            write!(f, "{} units", self.units)
        }
    }
}

#[cfg(feature = "std")]
pub use limit::{memory_limit_in, memory_limit_of, process_memory_limit};

#[cfg(feature = "std")]
mod limit {
    use std::path::{Component, Path, PathBuf};

    /// cgroup v1 reports "no limit" as a huge page-aligned number
    /// (`0x7FFF_FFFF_FFFF_F000` on 64-bit kernels); anything at or above 2⁶⁰ bytes
    /// (1 EiB) is read as no limit.
    const V1_UNLIMITED_FLOOR: u64 = 1 << 60;

    /// The memory limit of this process's cgroup, in bytes, or `None` when there is
    /// none (or it cannot be read): what [`memory_limit_of`] finds under the cgroup
    /// mount `/sys/fs/cgroup` for the process's membership in `/proc/self/cgroup`.
    ///
    /// # Examples
    ///
    /// ```
    /// use admit::{process_memory_limit, Capacity};
    ///
    /// const SESSION_BUFFER: u64 = 8 << 20;
    /// let budget = process_memory_limit().map_or(1 << 30, |limit| limit / 2);
    /// let capacity = Capacity::from_memory_budget(budget, SESSION_BUFFER);
    /// # let _ = capacity;
    /// ```
    #[must_use]
    pub fn process_memory_limit() -> Option<u64> {
        let membership = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        memory_limit_of(Path::new("/sys/fs/cgroup"), &membership)
    }

    /// The memory limit that applies to a process, given the cgroup mount point
    /// `cgroup_root` and the process's `membership` (the text of
    /// `/proc/<pid>/cgroup`): the lowest limit set on its cgroup or on any cgroup
    /// above it, since each of them bounds it.
    ///
    /// The cgroup comes from the line of the hierarchy that holds the memory
    /// controller: cgroup v1's `<n>:…memory…:<path>`, read as
    /// `<root>/memory/<path>/memory.limit_in_bytes`, else cgroup v2's `0::<path>`,
    /// read as `<root>/<path>/memory.max`. `max` (v2) and anything at or above 2⁶⁰
    /// bytes (v1's sentinel) mean no limit. Each cgroup from `<path>` up to the
    /// mount's root is read; those without the file are skipped. So both layouts
    /// work: the whole hierarchy mounted (a systemd service, a sandbox, a container
    /// sharing the host's cgroup namespace), where the process's own cgroup is
    /// several levels down, and a container's own cgroup mounted as the root, where
    /// `<path>` names a cgroup outside the mount and only the root is found.
    ///
    /// A membership with neither line (or a `<path>` that is not a plain absolute
    /// path) falls back to [`memory_limit_in`]`(cgroup_root)`.
    #[must_use]
    pub fn memory_limit_of(cgroup_root: &Path, membership: &str) -> Option<u64> {
        let mut v1 = None;
        let mut v2 = None;
        for line in membership.lines() {
            let mut fields = line.splitn(3, ':');
            let (Some(id), Some(controllers), Some(path)) =
                (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            if controllers.split(',').any(|c| c == "memory") {
                v1 = Some(path);
            } else if id == "0" && controllers.is_empty() {
                v2 = Some(path);
            }
        }
        let (dir, file, path) = match (v1, v2) {
            (Some(path), _) => (cgroup_root.join("memory"), "memory.limit_in_bytes", path),
            (None, Some(path)) => (cgroup_root.to_path_buf(), "memory.max", path),
            (None, None) => return memory_limit_in(cgroup_root),
        };
        let Some(own) = below(&dir, path) else {
            return memory_limit_in(cgroup_root);
        };
        own.ancestors()
            .take_while(|cgroup| cgroup.starts_with(&dir))
            .filter_map(|cgroup| std::fs::read_to_string(cgroup.join(file)).ok())
            .filter_map(|contents| parse_limit(&contents))
            .min()
    }

    /// `dir` joined with the cgroup `path`, if `path` is absolute and plain (no
    /// `..`, which a cgroup outside the reader's namespace shows).
    fn below(dir: &Path, path: &str) -> Option<PathBuf> {
        let path = Path::new(path);
        let mut components = path.components();
        if components.next() != Some(Component::RootDir) {
            return None;
        }
        let mut joined = dir.to_path_buf();
        for component in components {
            match component {
                Component::Normal(name) => joined.push(name),
                _ => return None,
            }
        }
        Some(joined)
    }

    /// A limit file's value: a number of bytes below v1's "no limit" sentinel.
    /// `max` (v2's no limit), the sentinel, and anything unreadable are `None`.
    fn parse_limit(contents: &str) -> Option<u64> {
        let limit: u64 = contents.trim().parse().ok()?;
        (limit < V1_UNLIMITED_FLOOR).then_some(limit)
    }

    /// The memory limit found under a cgroup mount point `cgroup_root`, read at its
    /// root only (see [`memory_limit_of`] for a process's own cgroup):
    ///
    /// 1. cgroup v2: `<root>/memory.max`; if it exists, v1 is not consulted.
    /// 2. Otherwise cgroup v1: `<root>/memory/memory.limit_in_bytes`.
    ///
    /// A number is the limit; `max` (v2) and anything at or above 2⁶⁰ bytes (v1's
    /// "unlimited" sentinel) mean no limit, as in [`memory_limit_of`].
    /// `None` when neither file exists or holds a number. Inside a container with
    /// its own cgroup namespace the mount's root is the container's cgroup, which
    /// holds the limit that matters.
    #[must_use]
    pub fn memory_limit_in(cgroup_root: &Path) -> Option<u64> {
        if let Ok(v2) = std::fs::read_to_string(cgroup_root.join("memory.max")) {
            return parse_limit(&v2);
        }
        let v1 = std::fs::read_to_string(cgroup_root.join("memory").join("memory.limit_in_bytes"))
            .ok()?;
        parse_limit(&v1)
    }
}
