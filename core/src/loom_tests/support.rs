//! What the crate's own loom models share: the negative control's runner. (The
//! `loom-tests` crate's `src/lib.rs` has the same runner beside the rest of what
//! the public-API models share; the two differ only in where `Safeguard` comes
//! from.)

use std::borrow::ToOwned;
use std::string::String;

use crate::safeguard::{switch_off, Safeguard};

/// A negative control: runs `model` under loom with `mechanism` switched off and
/// asserts that loom finds a failure whose report contains `expected`.
///
/// The model runs in a child process (this test binary again, filtered to the
/// calling test): a model that fails may leave loom's runtime unwinding through
/// loom objects, which aborts the process instead of failing one test.
///
/// # Panics
///
/// If the model passes with the mechanism off (it does not cover the mechanism),
/// or fails some other way than `expected`.
pub(crate) fn without(
    mechanism: Safeguard,
    expected: &str,
    model: impl Fn() + Sync + Send + 'static,
) {
    const CHILD: &str = "ADMIT_LOOM_NEGATIVE_CONTROL";
    if std::env::var_os(CHILD).is_some() {
        let _off = switch_off(mechanism);
        loom::model(model);
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
