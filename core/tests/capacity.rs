//! `Capacity::from_memory_budget` (floor, rounding, overflow) and the cgroup memory
//! limit readers on fixture directories.
// Needs the `std` feature (the feature powerset builds every test target).
#![cfg(feature = "std")]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use admit::{memory_limit_in, memory_limit_of, memory_use_of, Capacity, MemoryUse, Semaphore};

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

    /// Asserts the limit `memory_limit_of` finds here for each membership.
    fn assert_limits(&self, cases: &[(&str, Option<u64>)]) {
        for &(membership, limit) in cases {
            assert_eq!(
                memory_limit_of(&self.0, membership),
                limit,
                "membership {membership:?}"
            );
        }
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

// A process's own cgroup, from its membership (`/proc/self/cgroup`).

/// This machine's layout: cgroup v1 with the whole hierarchy mounted (no cgroup
/// namespace), the process several levels down. Reading the mount's root alone
/// misses the limit.
#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn v1_limit_on_the_process_own_cgroup_below_the_root() {
    let f = Fixture::new("v1own");
    f.write("memory/memory.limit_in_bytes", "9223372036854771712\n")
        .write(
            "memory/sandbox/memory.limit_in_bytes",
            "9223372036854771712\n",
        )
        .write("memory/sandbox/job-7/memory.limit_in_bytes", "2147483648\n");
    let membership = "9:pids:/\n4:memory:/sandbox/job-7\n1:cpu:/\n0::/\n";
    assert_eq!(memory_limit_of(&f.0, membership), Some(2 << 30));
    assert_eq!(memory_limit_in(&f.0), None, "the root alone sets no limit");
}

/// A systemd service on a cgroup v2 host: the root cgroup has no `memory.max`, the
/// service's own has the limit.
#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn v2_limit_on_the_process_own_cgroup_below_the_root() {
    let f = Fixture::new("v2own");
    f.write("system.slice/memory.max", "max\n")
        .write("system.slice/app.service/memory.max", "536870912\n");
    let membership = "0::/system.slice/app.service\n";
    assert_eq!(memory_limit_of(&f.0, membership), Some(512 << 20));
    assert_eq!(memory_limit_in(&f.0), None, "the root alone sets no limit");
}

/// Every cgroup above the process bounds it: the lowest limit on the way up wins.
#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn the_lowest_limit_on_the_way_up_wins() {
    let membership = "0::/system.slice/app.service\n";
    for (slice, service, expected) in [
        ("268435456", "max", Some(256 << 20)),
        ("268435456", "1073741824", Some(256 << 20)),
        ("268435456", "134217728", Some(128 << 20)),
        ("max", "max", None),
    ] {
        let f = Fixture::new("v2lowest");
        f.write("system.slice/memory.max", slice)
            .write("system.slice/app.service/memory.max", service);
        assert_eq!(
            memory_limit_of(&f.0, membership),
            expected,
            "slice {slice}, service {service}"
        );
    }
    let f = Fixture::new("v1lowest");
    f.write("memory/memory.limit_in_bytes", "9223372036854771712")
        .write("memory/a/memory.limit_in_bytes", "1073741824")
        .write("memory/a/b/memory.limit_in_bytes", "9223372036854771712");
    assert_eq!(memory_limit_of(&f.0, "3:memory:/a/b\n"), Some(1 << 30));
}

/// A container with its own cgroup mounted as the root while its membership names
/// the cgroup on the host (cgroup v1 without a namespace): the path is not under
/// the mount, and the root holds the limit.
#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn a_membership_outside_the_mount_reads_the_root() {
    let f = Fixture::new("v1container");
    f.write("memory/memory.limit_in_bytes", "1073741824\n");
    assert_eq!(
        memory_limit_of(&f.0, "11:memory:/docker/0123abcd\n"),
        Some(1 << 30)
    );
    // cgroup v2 with a namespace: the process is at the namespace's root.
    let f = Fixture::new("v2ns");
    f.write("memory.max", "1073741824\n");
    assert_eq!(memory_limit_of(&f.0, "0::/\n"), Some(1 << 30));
}

/// On a hybrid host both hierarchies are listed; the memory controller's line
/// decides, wherever it appears.
#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn the_hierarchy_with_the_memory_controller_decides() {
    let f = Fixture::new("hybrid");
    f.write("memory/a/memory.limit_in_bytes", "1073741824\n")
        .write("a/memory.max", "2147483648\n");
    f.assert_limits(&[
        ("0::/a\n4:memory:/a\n", Some(1 << 30)),
        ("4:memory:/a\n0::/a\n", Some(1 << 30)),
        // Controllers mounted together are listed together.
        ("4:cpu,memory:/a\n", Some(1 << 30)),
        // A controller whose name only contains "memory" is another controller.
        ("4:nomemory:/a\n0::/a\n", Some(2 << 30)),
        // A named v1 hierarchy (`name=…`, no controllers of its own) is not v2,
        // nor is any line but hierarchy 0 with an empty controller list.
        ("1:name=systemd:/a\n", None),
        ("7::/a\n", None),
        ("0:cpu:/a\n", None),
    ]);
}

/// Without a usable membership (unreadable, or a path from outside the reader's
/// namespace) the mount's root is read, as `memory_limit_in` does.
#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn without_a_usable_membership_the_root_is_read() {
    let f = Fixture::new("fallback");
    f.write("memory.max", "1073741824\n")
        .write("a/memory.max", "268435456\n");
    f.assert_limits(&[
        ("", Some(1 << 30)),
        ("garbage\n", Some(1 << 30)),
        ("0::/../../a\n", Some(1 << 30)),
        ("0::a\n", Some(1 << 30)),
        // The same cgroup, named plainly.
        ("0::/a\n", Some(256 << 20)),
    ]);
}

/// A file that holds no number is skipped; the others on the way up still count.
#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn an_unreadable_limit_is_skipped() {
    let f = Fixture::new("skip");
    f.write("a/memory.max", "lots\n")
        .write("memory.max", "1073741824\n");
    assert_eq!(memory_limit_of(&f.0, "0::/a\n"), Some(1 << 30));
}

/// v2: the working set is `memory.current` less `inactive_file`, read at the
/// cgroup whose limit binds.
#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn v2_working_set_is_usage_less_inactive_file() {
    let f = Fixture::new("v2use");
    f.write("system.slice/memory.max", "max\n")
        .write("system.slice/app.service/memory.max", "536870912\n")
        .write("system.slice/app.service/memory.current", "300000000\n")
        .write(
            "system.slice/app.service/memory.stat",
            "anon 200000000\nfile 100000000\nactive_file 40000000\ninactive_file 60000000\n",
        );
    let membership = "0::/system.slice/app.service\n";
    assert_eq!(
        memory_use_of(&f.0, membership),
        Some(MemoryUse::new(512 << 20, 240_000_000))
    );
}

/// v1: `memory.usage_in_bytes` less `total_inactive_file` (the hierarchy's, not
/// `inactive_file`, the cgroup's own).
#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn v1_working_set_is_usage_less_total_inactive_file() {
    let f = Fixture::new("v1use");
    f.write("memory/memory.limit_in_bytes", "9223372036854771712\n")
        .write("memory/job/memory.limit_in_bytes", "167772160\n")
        .write("memory/job/memory.usage_in_bytes", "150000000\n")
        .write(
            "memory/job/memory.stat",
            "cache 30000000\ninactive_file 1000\ntotal_inactive_file 20000000\n",
        );
    let membership = "4:memory:/job\n0::/\n";
    assert_eq!(
        memory_use_of(&f.0, membership),
        Some(MemoryUse::new(160 << 20, 130_000_000))
    );
}

/// The cgroup with the least room binds: a parent shared with a sibling can
/// have less than the process's own, lower, limit leaves.
#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn the_cgroup_with_the_least_room_binds() {
    let f = Fixture::new("leastroom");
    f.write("pod/memory.max", "1000000000\n")
        .write("pod/memory.current", "950000000\n")
        .write("pod/app/memory.max", "500000000\n")
        .write("pod/app/memory.current", "100000000\n");
    let membership = "0::/pod/app\n";
    assert_eq!(memory_limit_of(&f.0, membership), Some(500_000_000));
    assert_eq!(
        memory_use_of(&f.0, membership),
        Some(MemoryUse::new(1_000_000_000, 950_000_000)),
        "50 MB of room in the pod against 400 MB in the app"
    );
    // With the sibling gone, the app's own limit binds again.
    f.write("pod/memory.current", "120000000\n");
    assert_eq!(
        memory_use_of(&f.0, membership),
        Some(MemoryUse::new(500_000_000, 100_000_000))
    );
}

/// No limit, or a limit with no readable usage: no reading. A stat file without
/// the key, or none, counts no inactive cache; a cache larger than the usage
/// (the two files are read apart) counts the working set as 0.
#[test]
#[cfg_attr(miri, ignore = "miri isolates the file system")]
fn a_memory_use_needs_a_limit_and_a_usage() {
    let f = Fixture::new("usenone");
    f.write("app/memory.max", "max\n")
        .write("app/memory.current", "1000\n");
    assert_eq!(memory_use_of(&f.0, "0::/app\n"), None, "no limit");
    f.write("app/memory.max", "4096\n")
        .write("other/memory.max", "4096\n");
    assert_eq!(
        memory_use_of(&f.0, "0::/app\n"),
        Some(MemoryUse::new(4096, 1000)),
        "no stat file"
    );
    assert_eq!(memory_use_of(&f.0, "0::/other\n"), None, "no usage file");
    f.write("app/memory.stat", "inactive_file 5000\n");
    assert_eq!(
        memory_use_of(&f.0, "0::/app\n"),
        Some(MemoryUse::new(4096, 0))
    );
}
