//! A Tokio gate with an overload target leaves the overloaded state once it is
//! idle, with nobody spawning anything: `build` spawns its watch on the runtime.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use admit::{Observer, OverloadEvent};

admit::sources! { enum Route { Upload => "upload" } }

#[derive(Default)]
struct States(Mutex<Vec<bool>>);

impl Observer for States {
    fn on_overload(&self, e: &OverloadEvent) {
        self.0.lock().unwrap().push(e.overloaded);
    }
}

#[tokio::test(start_paused = true)]
async fn an_idle_gate_leaves_the_overloaded_state_by_itself() {
    let states = Arc::new(States::default());
    let gate = admit_tokio::gate::<Route>(1)
        .wait_budget(Duration::from_secs(5))
        .overload_target(Duration::from_millis(100))
        .observer(Arc::clone(&states))
        .build()
        .unwrap();
    // Eight requests at once for one unit, each held 300 ms: a standing queue.
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let gate = gate.clone();
            tokio::spawn(async move {
                if let Ok(permit) = gate.acquire(1, Route::Upload).await {
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    drop(permit);
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert!(
        states.0.lock().unwrap().contains(&true),
        "the queue made the gate overloaded"
    );
    // Idle from here: no request arrives, and within a few intervals (two mean
    // holds each) the gate says it is no longer overloaded.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(!gate.is_overloaded());
    assert_eq!(states.0.lock().unwrap().last(), Some(&false));
}
