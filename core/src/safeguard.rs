//! Safeguards: the mechanisms the wait queue relies on, each named so that a loom
//! model's negative control can switch one off and show the model then fails.
//!
//! In every build but the loom ones (`--cfg admit_loom`: the crate's own models,
//! and the library the `loom-tests` crate builds) and the shuttle unit tests
//! (`cfg(test)` with `--cfg admit_shuttle`), `on` is the constant `true` and the
//! checks compile away. There, `switch_off` turns one mechanism off for the current
//! thread (loom and shuttle run a model's threads on the test's thread) until the
//! returned guard is dropped.
//!
//! Each mechanism is switched at one site, the one that makes it (`Safeguard::X.on()`,
//! checked by this module's test), and its off arm is the smallest change that
//! removes it: a reader meets each broken variant once, where the mechanism lives.
//!
//! The items are `pub` only for `crate::__loom`, which re-exports them, doc-hidden
//! and outside semver, under `cfg(admit_loom)`; in every other build this module
//! is private and nothing outside the crate can name them.

/// A mechanism the models check by switching it off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Safeguard {
    /// A join sets `ARRIVED`, and the server's clearing of `QUEUED` fails while it
    /// is set: no parker is left behind a cleared `QUEUED`.
    Arrived,
    /// The phase leaves `WAITING` by a CAS, so a grant and a cancel cannot both
    /// win. Off: the server publishes its grant with a blind store.
    PhaseCas,
    /// A cancel that lost to a grant releases the granted units.
    CancelReleasesGrant,
    /// A grant that lost to a cancel gives the units it took back.
    #[cfg(feature = "alloc")]
    GrantGivesBack,
    /// A cancel that won asks for service (its request may have been the head).
    CancelServes,
    /// A join that found the semaphore closed asks for service.
    JoinServesClosed,
    /// A join that found nobody queued and the units free asks for service.
    JoinServesUnitsBack,
    /// A join that found its own request already resolved asks for service, so the
    /// `QUEUED` it set again is cleared.
    JoinServesResolved,
    /// A re-poll that lost its cell to a resolve reads the phase instead of
    /// reporting `Pending` with a waker nobody will wake.
    Registering,
    /// Asking for service always writes the role word, even when `PENDING` is set.
    RoleAlwaysWrites,
    /// While units are being retired after a shrink, fast paths refuse: a unit a
    /// release brings back goes to the retirement, not to whoever comes first.
    RetiringBlocksFastPath,
    /// A parker that finds after its join that the capacity no longer fits its
    /// request asks for a sweep: a shrink that lowered the capacity after the
    /// request checked it may have swept the queue before the request was in it.
    JoinSweepsOversize,
    /// A check that every unit is back reads the capacity and the units with no
    /// resize in flight and none begun meanwhile: never one change of a resize
    /// without the other.
    ResizeSeqlock,
    /// A check for every unit back that failed on resizes in flight asks the
    /// last of them to serve when it ends, so that the drain waiter is looked
    /// at again.
    DeferredCheckServes,
    /// A forget reads and writes the state word between lowering the capacity
    /// and marking it lowered, as a shrink does with `RETIRING`: a parker's join
    /// is ordered before (the sweep sees it) or after (it sees the capacity).
    ForgetOrdersAfterJoins,
    /// A check for every unit back reads the capacity by a read-modify-write,
    /// so that a counter's forget, which lowers it outside the seqlock and then
    /// reads the state word plainly, is seen by the check or sees the drain's
    /// join. Off: a plain load, and the two can miss each other.
    CheckReadsCapacityByRmw,
    /// The mark that the capacity was lowered is a read-modify-write, so that
    /// the pass that consumes it synchronizes with whoever made it.
    LoweredMarkIsRmw,
    /// A server's take for the head refuses while `RETIRING` is set: once the
    /// server has paid its debt it clears the flag, so finding it set again means
    /// a shrink posted after the server settled, and the pass goes round to pay
    /// that first.
    RetiringStopsGrants,
    /// A counter's request above the capacity waits for it rather than
    /// failing: its park, its turn at the head and a lowering of the capacity
    /// leave it be (`Semaphore::counting`).
    CounterWaitsOversize,
    /// After a close, drain waiters keep `QUEUED` set, so the release that brings
    /// the last unit back serves them.
    DrainKeepsQueued,
    /// The claimer that finds the first segment installed puts its address in
    /// `tail`, without the readers in transit that `head`'s word may count.
    #[cfg(feature = "alloc")]
    StartTakesTheAddress,
    /// The segment list's swing hands the helpers counted in `tail` over to the
    /// segment's own count. Off: it drops `tail`'s reference alone, and the
    /// helpers' releases take the count below what is still in use.
    #[cfg(feature = "alloc")]
    SwingCountsHelpers,
    /// The segment list's cursor swings `tail` off a segment before marking it
    /// passed. Off: a helper that reads the mark claims again on a `tail` that
    /// still names the full segment, and again, until another helper swings.
    #[cfg(feature = "alloc")]
    PassSwingsTail,
    /// The cancel that completes a segment marks its link before the walk: a
    /// frozen link, which nobody splices through. Off: nothing is frozen, so
    /// nothing is found to splice and the segment stays linked.
    #[cfg(feature = "alloc")]
    Freeze,
    /// A splice's CAS fails on a frozen link unless the link is the cursor's
    /// segment's. Off: a splice through a segment frozen meanwhile goes through,
    /// and that segment's own splice can put back one already cleaned up, which
    /// stays linked.
    #[cfg(feature = "alloc")]
    SpliceNeedsLiveLink,
    /// A splice's CAS fails on a link the cursor is passing. Off: a splice can
    /// take out the segment the cursor has just moved into, and clean it up
    /// under the cursor.
    #[cfg(feature = "alloc")]
    SpliceRespectsPass,
    /// A cancel that won reads the state word by a read-modify-write (its count
    /// out), so that a server that stops at the cancelled head for want of
    /// units either sees the cancel or is seen by it. Off: a relaxed count and a
    /// plain load, and the two can miss each other.
    CancelReadsByRmw,
    /// Without `alloc`: an owner that has read its request's final phase enters
    /// the critical section once before it lets go of its node, so the server
    /// that resolved the node, which touches it only inside the critical
    /// section, is done with it. Off: the future's memory can be let go of
    /// while that server still takes the waker out of it.
    #[cfg(not(feature = "alloc"))]
    FinishEntersCriticalSection,
    /// A server that meets a cell claimed but not published while units are
    /// free breaks it and moves on. Off: it waits there, and the cell's owner
    /// joins behind a `QUEUED` set by others, so nobody serves it.
    #[cfg(feature = "alloc")]
    BreakUnpublished,
    /// A shed counts its request doomed before the CAS that resolves it, so
    /// that the owner, who counts it out once it reads `SHED`, never takes the
    /// count below zero. Off: counted after the CAS.
    #[cfg(feature = "alloc")]
    DoomBeforeShed,
    /// A serving loop that a waker panics out of still makes the pass it owed
    /// (a full wake batch, or service asked for meanwhile) while the panic
    /// unwinds. Off: the requests behind the batch stay parked with their units
    /// free until some later release or cancel serves.
    ServesOnUnwind,
    /// A server that finds the semaphore closed mid-pass leaves the cells to
    /// the next pass's close. Off: it closes the head itself, and a drain
    /// waiter published after the close (which only a close pass may answer,
    /// once every unit is back) ends with `Closed`.
    ClosedMidPassWaits,
    /// A walk past the cursor (a close's, a sweep's) that finds its segment
    /// removed under it goes on from the first segment after it, found from
    /// `head`. Off: it stops there, and the requests after it are not reached.
    #[cfg(feature = "alloc")]
    ScanFindsItsWay,
}

#[cfg(not(any(admit_loom, all(test, admit_shuttle))))]
impl Safeguard {
    /// Always on outside loom.
    #[inline(always)]
    pub(crate) const fn on(self) -> bool {
        true
    }
}

#[cfg(any(admit_loom, all(test, admit_shuttle)))]
pub use switch::switch_off;
#[cfg(admit_loom)]
pub use switch::SwitchedOff;

#[cfg(any(admit_loom, all(test, admit_shuttle)))]
mod switch {
    extern crate std;

    use core::cell::Cell;

    use super::Safeguard;

    std::thread_local! {
        static OFF: Cell<Option<Safeguard>> = const { Cell::new(None) };
    }

    impl Safeguard {
        /// Whether the mechanism is on (every one is, unless a negative control
        /// switched it off).
        pub(crate) fn on(self) -> bool {
            OFF.with(|off| off.get() != Some(self))
        }
    }

    /// Switches `mechanism` off on this thread until the guard is dropped.
    pub fn switch_off(mechanism: Safeguard) -> SwitchedOff {
        OFF.with(|off| off.set(Some(mechanism)));
        SwitchedOff(())
    }

    /// Turns the mechanism back on when dropped.
    #[derive(Debug)]
    #[must_use = "the mechanism is on again as soon as the guard is dropped"]
    pub struct SwitchedOff(());

    impl Drop for SwitchedOff {
        fn drop(&mut self) {
            OFF.with(|off| off.set(None));
        }
    }
}

/// A negative control's runner: runs `run` (a loom model) with `mechanism`
/// switched off, or with every mechanism on if `None`, and asserts that it fails
/// with a report containing `expected` (a deadlock, a data race, a failed
/// assertion, a leak). Shared by the crate's own models and `loom-tests`'.
///
/// The model runs in a child process (this test binary again, filtered to the
/// calling test): a model that fails may leave loom's runtime unwinding through
/// loom objects, which aborts the process instead of failing one test.
///
/// # Panics
///
/// If the model passes (it does not cover the mechanism), or fails some other
/// way than `expected`.
#[cfg(admit_loom)]
#[allow(clippy::std_instead_of_alloc)] // test code on std, in builds without `alloc` too
pub fn expect_failure(mechanism: Option<Safeguard>, expected: &str, run: impl FnOnce()) {
    use std::borrow::ToOwned;
    use std::string::String;

    const CHILD: &str = "ADMIT_LOOM_NEGATIVE_CONTROL";
    if std::env::var_os(CHILD).is_some() {
        let _off = mechanism.map(switch_off);
        run();
        return;
    }
    let test = std::thread::current()
        .name()
        .expect("libtest names the test thread after the test")
        .to_owned();
    let exe = std::env::current_exe().expect("the test binary");
    let out = std::process::Command::new(exe)
        .args([test.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("the test binary runs");
    let report = std::format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success(),
        "with {mechanism:?} off the model still passes: it does not cover the mechanism\n{report}"
    );
    assert!(
        report.contains(expected),
        "with {mechanism:?} off the model failed, but not with {expected:?}:\n{report}"
    );
}

#[cfg(all(test, not(admit_loom), not(miri)))]
#[allow(clippy::std_instead_of_alloc)] // test code on std, in builds without `alloc` too
mod tests {
    extern crate std;

    use std::path::Path;
    use std::string::{String, ToString};
    use std::vec::Vec;
    use std::{format, fs};

    /// The non-test sources under `dir`, read into `out`.
    fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy();
            if name == "tests" || name == "tests.rs" || name == "safeguard.rs" {
                continue;
            }
            if path.is_dir() {
                sources(&path, out);
            } else if name.ends_with(".rs") {
                out.push((
                    path.display().to_string(),
                    fs::read_to_string(&path).unwrap(),
                ));
            }
        }
    }

    #[test]
    fn each_safeguard_is_switched_at_one_site() {
        let variants: Vec<&str> = include_str!("safeguard.rs")
            .split("pub enum Safeguard {")
            .nth(1)
            .unwrap()
            .split("\n}")
            .next()
            .unwrap()
            .lines()
            .map(str::trim)
            .filter_map(|line| line.strip_suffix(','))
            .filter(|name| name.chars().all(char::is_alphanumeric))
            .collect();
        assert!(variants.len() > 20, "{variants:?}");
        let mut files = Vec::new();
        sources(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut files,
        );
        for variant in &variants {
            let switch = format!("Safeguard::{variant}.on()");
            let sites: Vec<&str> = files
                .iter()
                .flat_map(|(path, text)| {
                    core::iter::repeat_n(path.as_str(), text.matches(switch.as_str()).count())
                })
                .collect();
            assert_eq!(sites.len(), 1, "{switch} at {sites:?}");
        }
        let all = files
            .iter()
            .map(|(_, text)| text.matches("Safeguard::").count())
            .sum::<usize>();
        assert_eq!(
            all,
            variants.len(),
            "a switch not written `Safeguard::X.on()`"
        );
    }
}
