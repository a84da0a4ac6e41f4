//! Two gates reporting to one recorder under one prefix would merge their
//! series (`units_in_use` summed, `capacity_units` overwritten): the second
//! build panics, naming the prefix. A prefix is free again once its gate is
//! gone, and free in another recorder.

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
fn a_second_gate_on_a_prefix_in_use_in_one_recorder_is_refused() {
    let recorder = DebuggingRecorder::new();
    metrics::with_local_recorder(&recorder, || {
        let uploads = gate("uploads");
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
    });
    // In another recorder, the same prefix is another set of series.
    let other = DebuggingRecorder::new();
    let _kept = metrics::with_local_recorder(&recorder, || gate("uploads"));
    metrics::with_local_recorder(&other, || drop(gate("uploads")));
}
