//! `Capacity::from_memory_budget` (floor, rounding, overflow) and the cgroup memory
//! limit reader on fixture directories.
// Needs the `std` feature (the feature powerset builds every test target).
#![cfg(feature = "std")]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use admit::{memory_limit_in, Capacity, Semaphore};

#[test]
fn rounds_down() {
    assert_eq!(Capacity::from_memory_budget(999, 100).units(), 9);
    assert_eq!(Capacity::from_memory_budget(1000, 100).units(), 10);
    assert_eq!(Capacity::from_memory_budget(1001, 100).units(), 10);
    assert_eq!(Capacity::from_memory_budget(0, 100).units(), 0);
}

#[test]
fn floor_is_max_units_for_memory_derived_only() {
    let mem = Capacity::from_memory_budget(150, 100);
    assert!(mem.is_memory_derived());
    assert_eq!(mem.floored(1), 1);
    assert_eq!(mem.floored(2), 2);
    assert_eq!(Capacity::from_memory_budget(0, 100).floored(3), 3);
    assert_eq!(Capacity::from_memory_budget(1000, 100).floored(3), 10);

    let fixed = Capacity::from(1);
    assert!(!fixed.is_memory_derived());
    assert_eq!(
        fixed.floored(2),
        1,
        "an explicit capacity is validated, not raised"
    );
}

#[test]
fn saturates_at_max_units() {
    assert_eq!(
        Capacity::from_memory_budget(u64::MAX, 1).units(),
        Semaphore::MAX_UNITS
    );
    let just_over = Semaphore::MAX_UNITS as u64 + 1;
    assert_eq!(
        Capacity::from_memory_budget(just_over, 1).units(),
        Semaphore::MAX_UNITS
    );
    assert_eq!(
        Capacity::from_memory_budget(Semaphore::MAX_UNITS as u64, 1).units(),
        Semaphore::MAX_UNITS
    );
    assert_eq!(Capacity::from_memory_budget(u64::MAX, u64::MAX).units(), 1);
}

#[test]
#[should_panic(expected = "bytes_per_unit must be greater than zero")]
fn zero_bytes_per_unit_panics() {
    let _ = Capacity::from_memory_budget(1 << 30, 0);
}

/// A fresh, empty fixture directory under the system temp dir.
struct Fixture(PathBuf);

impl Fixture {
    fn new(name: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "admit-cgroup-{name}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn write(&self, rel: &str, contents: &str) -> &Self {
        let path = self.0.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, contents).unwrap();
        self
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn cgroup_v2_limit() {
    let f = Fixture::new("v2");
    f.write("memory.max", "536870912\n");
    assert_eq!(memory_limit_in(&f.0), Some(512 << 20));
}

#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn cgroup_v2_max_means_no_limit_and_v1_is_not_consulted() {
    let f = Fixture::new("v2max");
    f.write("memory.max", "max\n")
        .write("memory/memory.limit_in_bytes", "1048576\n");
    assert_eq!(memory_limit_in(&f.0), None);
}

#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn cgroup_v1_limit() {
    let f = Fixture::new("v1");
    f.write("memory/memory.limit_in_bytes", "1073741824\n");
    assert_eq!(memory_limit_in(&f.0), Some(1 << 30));
}

#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn cgroup_v1_sentinel_means_no_limit() {
    let f = Fixture::new("v1sentinel");
    f.write("memory/memory.limit_in_bytes", "9223372036854771712\n");
    assert_eq!(memory_limit_in(&f.0), None);
}

#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn no_cgroup_files_means_no_limit() {
    let f = Fixture::new("none");
    assert_eq!(memory_limit_in(&f.0), None);
    assert_eq!(memory_limit_in(&f.0.join("does-not-exist")), None);
}

#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn garbage_means_no_limit() {
    let f = Fixture::new("garbage");
    f.write("memory.max", "lots\n");
    assert_eq!(memory_limit_in(&f.0), None);
}

#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn a_limit_sizes_a_gate() {
    let f = Fixture::new("sizing");
    f.write("memory.max", "268435456\n"); // 256 MiB
    let limit = memory_limit_in(&f.0).unwrap();
    assert_eq!(Capacity::from_memory_budget(limit, 64 << 20).units(), 4);
}

/// cgroup v1 has no "max": values from 2^60 up are its ways of saying "no limit".
#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn cgroup_v1_unlimited_starts_exactly_at_two_to_the_sixty() {
    let f = Fixture::new("v1floor");
    f.write("memory/memory.limit_in_bytes", &format!("{}\n", 1u64 << 60));
    assert_eq!(memory_limit_in(&f.0), None);
    let g = Fixture::new("v1belowfloor");
    g.write(
        "memory/memory.limit_in_bytes",
        &format!("{}\n", (1u64 << 60) - 1),
    );
    assert_eq!(memory_limit_in(&g.0), Some((1 << 60) - 1));
}

/// The process reads its own cgroup mount, `/sys/fs/cgroup`.
#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn the_process_limit_is_read_from_sys_fs_cgroup() {
    assert_eq!(
        admit::process_memory_limit(),
        memory_limit_in(std::path::Path::new("/sys/fs/cgroup"))
    );
}
