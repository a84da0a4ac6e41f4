//! Two gates reporting to the global recorder under one prefix would merge their
//! series (`units_in_use` summed, `capacity_units` overwritten): the second
//! build panics, naming the prefix. A prefix is free again once its gate is
//! gone. Local recorders are not checked: one may take the address of another
//! that a live gate reported to.
//!
//! One test function: the global recorder is the process's, installed once.

use std::panic::{catch_unwind, AssertUnwindSafe};

use admit::{Gate, ThreadTimer};
use admit_metrics::MetricsObserver;
use metrics_util::debugging::DebuggingRecorder;

admit::sources! { enum Route { Upload => "upload" } }

fn gate(prefix: &str) -> Gate<Route, ThreadTimer, MetricsObserver> {
    Gate::builder(4)
        .timer(ThreadTimer::new())
        .observer(MetricsObserver::new(prefix))
        .build()
        .unwrap()
}

#[test]
fn a_second_gate_on_a_prefix_in_use_in_the_global_recorder_is_refused() {
    // Local recorders first (before the global one exists): never refused, even
    // when a new recorder sits where one a live gate reported to used to be.
    let kept: Vec<_> = (0..8)
        .map(|_| {
            let recorder = DebuggingRecorder::new();
            metrics::with_local_recorder(&recorder, || gate("uploads"))
        })
        .collect();
    let recorder = DebuggingRecorder::new();
    metrics::with_local_recorder(&recorder, || {
        let _a = gate("local");
        let _b = gate("local");
    });

    DebuggingRecorder::new().install().unwrap();
    // The gates kept from local recorders do not hold the prefix globally.
    let uploads = gate("uploads");
    drop(kept);
    let _pulls = gate("pulls"); // another prefix: fine
    let second = catch_unwind(AssertUnwindSafe(|| gate("uploads")));
    let message = second.expect_err("refused");
    let message = message
        .downcast_ref::<String>()
        .expect("a formatted message");
    assert!(
        message.contains("`uploads`") && message.contains("prefix of its own"),
        "{message}"
    );
    // Once the first gate is gone, the prefix is free.
    drop(uploads);
    let _again = gate("uploads");
}
