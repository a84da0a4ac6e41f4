//! The comparison of `examples/vs_concurrency_limit.rs`, checked: on the same load,
//! tower's `LoadShed` + `ConcurrencyLimit` lets services made ready and never called
//! hold capacity, sheds without waiting, and counts requests rather than units;
//! `AdmitLayer` does none of that.

#[path = "../examples/vs_concurrency_limit.rs"]
mod compare;

use compare::{run, Stack, CAPACITY};

#[tokio::test(start_paused = true)]
async fn the_layer_holds_nothing_for_ready_services_and_waits_before_it_sheds() {
    for idle in [0, 2] {
        let admit = run(Stack::Admit, idle).await;
        let tower = run(Stack::ConcurrencyLimit, idle).await;

        assert_eq!(admit.held_by_idle, 0, "{admit:?}");
        assert_eq!(tower.held_by_idle, idle, "{tower:?}");
        assert_eq!(admit.shed_at_once, 0, "a shed waits its budget: {admit:?}");
        assert_eq!(tower.shed, tower.shed_at_once, "{tower:?}");
        assert!(admit.peak_units <= CAPACITY, "weighted: {admit:?}");
        assert!(admit.admitted > tower.admitted, "{admit:?} vs {tower:?}");
        // Idle services change nothing for the layer.
        assert_eq!(
            admit,
            compare::Figures {
                idle,
                ..run(Stack::Admit, 0).await
            }
        );
    }
    // Counting requests, not units, the pair lets a mirror in over the budget.
    assert!(run(Stack::ConcurrencyLimit, 0).await.peak_units > CAPACITY);
}
