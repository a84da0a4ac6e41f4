//! The memory limit of a process, from the cgroup filesystem (v2 `memory.max`,
//! then v1), so a server can size its gate from the memory it actually has at
//! start; and the memory its cgroup uses against that limit, as the kernel
//! counts it (feature `std`).

use alloc::vec;
use alloc::vec::Vec;
use std::path::{Component, Path, PathBuf};

use super::observer::MemoryUse;

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
    memory_limit_of(Path::new(CGROUP_MOUNT), &own_membership())
}

/// Where the cgroup filesystem is mounted.
const CGROUP_MOUNT: &str = "/sys/fs/cgroup";

/// This process's `/proc/self/cgroup` (empty if it cannot be read).
fn own_membership() -> alloc::string::String {
    std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default()
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
    let (layout, cgroups) = cgroups_of(cgroup_root, membership)?;
    cgroups
        .iter()
        .filter_map(|cgroup| read_limit(cgroup, layout))
        .min()
}

/// The memory a process's cgroup uses against its limit, as the kernel counts
/// it: what [`memory_use_of`] finds under `/sys/fs/cgroup` for the process's
/// membership in `/proc/self/cgroup`.
#[must_use]
pub fn process_memory_use() -> Option<MemoryUse> {
    memory_use_of(Path::new(CGROUP_MOUNT), &own_membership())
}

/// The memory use of the cgroup that binds a process: of its cgroup and those
/// above it that set a limit (found as [`memory_limit_of`] finds them), the one
/// with the least room left under its limit, since the kernel reclaims, and
/// then kills, at the first limit reached. That is usually the one with the
/// lowest limit; a parent shared with siblings can have less room. `None` when
/// no cgroup sets a limit, or the one that binds has no readable usage.
///
/// Its working set is what Kubernetes evicts by: v1
/// `memory.usage_in_bytes` less `total_inactive_file` of `memory.stat`, v2
/// `memory.current` less `inactive_file` (file cache the kernel drops before it
/// reclaims anything else; a stat file without the key counts none).
#[must_use]
pub fn memory_use_of(cgroup_root: &Path, membership: &str) -> Option<MemoryUse> {
    let (layout, cgroups) = cgroups_of(cgroup_root, membership)?;
    cgroups
        .iter()
        .filter_map(|cgroup| {
            let limit = read_limit(cgroup, layout)?;
            let usage = read_number(&cgroup.join(layout.usage_file()))?;
            let stat = std::fs::read_to_string(cgroup.join("memory.stat")).unwrap_or_default();
            let inactive_file = stat_value(&stat, layout.inactive_file_key()).unwrap_or(0);
            Some(MemoryUse {
                limit,
                working_set: usage.saturating_sub(inactive_file),
            })
        })
        .min_by_key(|used| used.limit.saturating_sub(used.working_set))
}

/// The two layouts of the memory controller's files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    V1,
    V2,
}

impl Layout {
    fn limit_file(self) -> &'static str {
        match self {
            Layout::V1 => "memory.limit_in_bytes",
            Layout::V2 => "memory.max",
        }
    }

    fn usage_file(self) -> &'static str {
        match self {
            Layout::V1 => "memory.usage_in_bytes",
            Layout::V2 => "memory.current",
        }
    }

    /// The key of `memory.stat` for the cgroup's inactive file cache, its
    /// descendants' included.
    fn inactive_file_key(self) -> &'static str {
        match self {
            Layout::V1 => "total_inactive_file",
            Layout::V2 => "inactive_file",
        }
    }
}

/// The layout, and the directories of the process's cgroup and of each above
/// it up to the mount's root, its own first; or the mount's root alone, when the
/// membership names none (see [`memory_limit_of`]).
fn cgroups_of(cgroup_root: &Path, membership: &str) -> Option<(Layout, Vec<PathBuf>)> {
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
    let (dir, layout, path) = match (v1, v2) {
        (Some(path), _) => (cgroup_root.join("memory"), Layout::V1, path),
        (None, Some(path)) => (cgroup_root.to_path_buf(), Layout::V2, path),
        (None, None) => return root_of(cgroup_root),
    };
    let Some(own) = below(&dir, path) else {
        return root_of(cgroup_root);
    };
    let cgroups = own
        .ancestors()
        .take_while(|cgroup| cgroup.starts_with(&dir))
        .map(Path::to_path_buf)
        .collect();
    Some((layout, cgroups))
}

/// The mount's root as the one cgroup: v2 if it has `memory.max`, else v1's
/// `memory` directory (see [`memory_limit_in`]).
fn root_of(cgroup_root: &Path) -> Option<(Layout, Vec<PathBuf>)> {
    if cgroup_root.join("memory.max").exists() {
        return Some((Layout::V2, vec![cgroup_root.to_path_buf()]));
    }
    Some((Layout::V1, vec![cgroup_root.join("memory")]))
}

/// A cgroup's limit: `None` for none, or when it cannot be read.
fn read_limit(cgroup: &Path, layout: Layout) -> Option<u64> {
    let contents = std::fs::read_to_string(cgroup.join(layout.limit_file())).ok()?;
    parse_limit(&contents)
}

/// A file holding one number.
fn read_number(file: &Path) -> Option<u64> {
    std::fs::read_to_string(file).ok()?.trim().parse().ok()
}

/// The value of `key` in a `memory.stat` (lines of `key value`).
fn stat_value(stat: &str, key: &str) -> Option<u64> {
    stat.lines().find_map(|line| {
        let (name, value) = line.split_once(' ')?;
        (name == key).then(|| value.trim().parse().ok()).flatten()
    })
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
    let (layout, cgroups) = root_of(cgroup_root)?;
    read_limit(&cgroups[0], layout)
}
