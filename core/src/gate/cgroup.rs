//! The memory limit of a process, from the cgroup filesystem (v2 `memory.max`,
//! then v1), so a server can size its gate from the memory it actually has at
//! start (feature `std`).

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
    let v1 =
        std::fs::read_to_string(cgroup_root.join("memory").join("memory.limit_in_bytes")).ok()?;
    parse_limit(&v1)
}
