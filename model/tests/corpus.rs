//! Replays the fuzz corpus (`fuzz/corpus/<target>/`) and bounded seeded sweeps
//! against the reference models of this crate on stable, so CI exercises the
//! `semaphore_ops` and `gate_ops` fuzz targets without nightly. Also holds named
//! regression sequences, and checks the hand-written seeds byte for byte.

use std::path::Path;

use admit::Priority;
use admit_model::gate::{raw_site, replay_gate, replay_gate_bytes, GateCase, GateOp, GateStats};
use admit_model::semaphore::{replay, replay_bytes, replay_case, Case, Op, Stats};

/// Every file of `fuzz/corpus/semaphore_ops/` replays without a disagreement.
#[test]
#[cfg_attr(miri, ignore = "reads files, which miri's isolation forbids")]
fn corpus_replays() {
    let mut total = Stats::default();
    for data in corpus("semaphore_ops") {
        if let Some(stats) = replay_bytes(&data) {
            add(&mut total, &stats);
        }
    }
    assert_reaches_everything(&total, "corpus");
    assert_reaches_lifecycle(&total, "corpus");
}

/// Every file of `fuzz/corpus/gate_ops/` replays without a disagreement.
#[test]
#[cfg_attr(miri, ignore = "reads files, which miri's isolation forbids")]
fn gate_corpus_replays() {
    let mut total = GateStats::default();
    for data in corpus("gate_ops") {
        if let Some(stats) = replay_gate_bytes(&data) {
            add_gate(&mut total, &stats);
        }
    }
    assert_gate_reaches_everything(&total, "gate corpus");
    assert_gate_reaches_the_cap_shed(&total, "gate corpus");
    assert_gate_reaches_lifecycle(&total, "gate corpus");
    assert_gate_reaches_memory(&total, "gate corpus");
}

/// The files of `fuzz/corpus/<target>/`, in name order. A failing file is named
/// on stderr (the replay panics while the name is on record).
fn corpus(target: &str) -> impl Iterator<Item = Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("corpus entry").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no corpus files in {}", dir.display());
    files.into_iter().map(|file| {
        eprintln!("replaying {}", file.display());
        std::fs::read(&file).expect("corpus file")
    })
}

/// A seeded sweep of random inputs, 16 to 256 bytes each.
#[test]
fn random_sweep() {
    let mut total = Stats::default();
    for data in random_inputs(0x9e37_79b9_7f4a_7c15, scaled(2_000)) {
        let replayed = replay_or_say(
            || replay_bytes(&data),
            || format!("sweep input failed: {data:02x?}"),
        );
        if let Some(stats) = replayed {
            add(&mut total, &stats);
        }
    }
    assert_reaches_everything(&total, "sweep");
    assert_reaches_lifecycle(&total, "sweep");
}

/// The same sweep for the gate, three times as long: with requests above
/// `max_units` refused at once and resizes below it refused, uniform bytes build
/// queues less often, and a shed at the overload cap is rare (about one in 2,000
/// inputs).
#[test]
fn gate_random_sweep() {
    let mut total = GateStats::default();
    for data in random_inputs(0x2545_f491_4f6c_dd1d, scaled_for_reach(2_000, 3)) {
        let replayed = replay_or_say(
            || replay_gate_bytes(&data),
            || format!("gate sweep input failed: {data:02x?}"),
        );
        if let Some(stats) = replayed {
            add_gate(&mut total, &stats);
        }
    }
    // Not the cap shed: too few overloads here (the weighted sweep and the
    // corpus reach it).
    assert_gate_reaches_everything(&total, "gate sweep");
    assert_gate_reaches_lifecycle(&total, "gate sweep");
    assert_gate_reaches_memory(&total, "gate sweep");
    assert!(
        cfg!(miri)
            || total.memory_floored > 0
                && total.memory_sheds_critical_plus > 0
                && total.memory_probes > 0
                && total.memory_watch_ends > 0,
        "the gate sweep never reached a reading below the floor, a memory shed of \
         CriticalPlus, a probe, or the watch's end: {total:?}"
    );
}

/// Runs one replay of a sweep; if it panics, says which input failed (the sweep's
/// inputs are generated, not files) before the panic goes on.
fn replay_or_say<R>(
    replay: impl FnOnce() -> R + std::panic::UnwindSafe,
    failed: impl FnOnce() -> String,
) -> R {
    std::panic::catch_unwind(replay).unwrap_or_else(|panic| {
        eprintln!("{}", failed());
        std::panic::resume_unwind(panic)
    })
}

/// `count` inputs of 16 to 256 bytes from a seeded xorshift.
fn random_inputs(seed: u64, count: usize) -> impl Iterator<Item = Vec<u8>> {
    let mut rng = XorShift(seed);
    (0..count).map(move |_| {
        let len = 16 + (rng.next() % 241) as usize;
        (0..len).map(|_| rng.next() as u8).collect()
    })
}

/// A seeded sweep at the level of operations, weighted towards building queues
/// (uniform bytes pick each `Op` variant equally, so waiters rarely pile up).
#[test]
fn weighted_op_sweep() {
    let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
    let mut total = Stats::default();
    for case in 0..scaled(1_000) {
        let capacity = rng.next() as u8;
        let len = 20 + (rng.next() % 480) as usize;
        let ops: Vec<Op> = (0..len)
            .map(|_| {
                let (pick, a, b) = (rng.next() % 1000, rng.next() as u8, rng.next() % 2 == 0);
                match pick {
                    0..=279 => Op::Acquire { units: a, owned: b },
                    280..=539 => Op::Poll(a),
                    540..=609 => Op::RunWoken,
                    610..=739 => Op::Release {
                        permit: a,
                        explicit: b,
                    },
                    740..=819 => Op::TryAcquire { units: a, owned: b },
                    820..=919 => Op::Drop(a),
                    920..=994 => Op::PollNewWaker(a),
                    _ => Op::Close,
                }
            })
            .collect();
        let stats = replay_or_say(
            || replay(capacity, &ops),
            || format!("weighted case {case} failed: capacity {capacity}, {ops:?}"),
        );
        add(&mut total, &stats);
    }
    assert_reaches_everything(&total, "weighted sweep");
    assert!(
        cfg!(miri) || total.max_parked >= 32,
        "never parked a full batch: {total:?}"
    );
}

/// A seeded sweep weighted towards the lifecycle operations: resizes (grows,
/// shrinks below the units in use, to 0), splits, merges, forgets and drains,
/// among queues deep enough for a shrink to fail waiters behind the head.
#[test]
fn weighted_lifecycle_sweep() {
    let mut rng = XorShift(0x6a09_e667_f3bc_c909);
    let mut total = Stats::default();
    for case in 0..scaled(1_000) {
        let capacity = rng.next() as u8;
        let len = 20 + (rng.next() % 400) as usize;
        let ops: Vec<Op> = (0..len)
            .map(|_| {
                let (pick, a, b) = (rng.next() % 1000, rng.next() as u8, rng.next() as u8);
                match pick {
                    0..=219 => Op::Acquire {
                        units: a,
                        owned: b % 2 == 0,
                    },
                    220..=419 => Op::Poll(a),
                    420..=469 => Op::RunWoken,
                    470..=569 => Op::Release {
                        permit: a,
                        explicit: b % 2 == 0,
                    },
                    570..=639 => Op::TryAcquire {
                        units: a,
                        owned: b % 2 == 0,
                    },
                    640..=689 => Op::Drop(a),
                    690..=709 => Op::PollNewWaker(a),
                    710..=799 => Op::SetCapacity(a),
                    800..=839 => Op::AddUnits(a),
                    840..=899 => Op::Split {
                        permit: a,
                        units: b,
                    },
                    900..=939 => Op::Merge { a, b },
                    940..=979 => Op::Forget(a),
                    980..=992 => Op::Close,
                    _ => Op::Drain,
                }
            })
            .collect();
        let stats = replay_or_say(
            || replay(capacity, &ops),
            || format!("lifecycle case {case} failed: capacity {capacity}, {ops:?}"),
        );
        add(&mut total, &stats);
    }
    assert_reaches_everything(&total, "lifecycle sweep");
    assert_reaches_lifecycle(&total, "lifecycle sweep");
}

/// The weighted sweep for the gate: queues, deadlines and signals, rare closes.
#[test]
fn gate_weighted_sweep() {
    let mut rng = XorShift(0x0bad_c0de_1234_5679);
    let mut total = GateStats::default();
    for _ in 0..scaled(600) {
        let (capacity, budget) = (rng.next() as u8, rng.next() as u8);
        let len = 20 + (rng.next() % 300) as usize;
        let ops: Vec<GateOp> = (0..len)
            .map(|_| {
                let (pick, a, b) = (rng.next() % 1000, rng.next() as u8, rng.next() as u8);
                match pick {
                    0..=249 => GateOp::Acquire {
                        units: a,
                        site: b,
                        ceiling: (b % 4 == 0).then_some(a),
                    },
                    250..=479 => GateOp::Poll(a),
                    480..=579 => GateOp::RunWoken,
                    580..=699 => GateOp::Release {
                        permit: a,
                        explicit: b % 2 == 0,
                    },
                    700..=769 => GateOp::TryAcquire { units: a, site: b },
                    770..=829 => GateOp::Drop(a),
                    830..=889 => GateOp::Fire(a),
                    890..=994 => GateOp::Advance(a),
                    _ => GateOp::Close,
                }
            })
            .collect();
        let case = GateCase {
            capacity,
            budget,
            ops,
        };
        let stats = replay_or_say(
            || replay_gate(&case),
            || format!("gate weighted case {case:?} failed"),
        );
        add_gate(&mut total, &stats);
    }
    assert_gate_reaches_everything(&total, "gate weighted sweep");
    assert_gate_reaches_the_cap_shed(&total, "gate weighted sweep");
    assert!(
        cfg!(miri) || total.admits_at_deadline > 0 && total.cancels_after_grant > 0,
        "{total:?}"
    );
}

/// The gate's weighted sweep with resizes, splits, merges and forgets among the
/// queues, deadlines and signals. Twice as long as the plain weighted sweep:
/// resizes below `max_units` are refused, so the capacity stays higher and
/// queues (and sheds at the overload cap) are rarer.
#[test]
fn gate_weighted_lifecycle_sweep() {
    let mut rng = XorShift(0xbb67_ae85_84ca_a73b);
    let mut total = GateStats::default();
    for _ in 0..scaled_for_reach(600, 2) {
        let (capacity, budget) = (rng.next() as u8, rng.next() as u8);
        let len = 20 + (rng.next() % 300) as usize;
        let ops: Vec<GateOp> = (0..len)
            .map(|_| {
                let (pick, a, b) = (rng.next() % 1000, rng.next() as u8, rng.next() as u8);
                match pick {
                    0..=229 => GateOp::Acquire {
                        units: a,
                        site: b,
                        ceiling: (b % 4 == 0).then_some(a),
                    },
                    230..=429 => GateOp::Poll(a),
                    430..=509 => GateOp::RunWoken,
                    510..=609 => GateOp::Release {
                        permit: a,
                        explicit: b % 2 == 0,
                    },
                    610..=659 => GateOp::TryAcquire { units: a, site: b },
                    660..=699 => GateOp::Drop(a),
                    700..=739 => GateOp::Fire(a),
                    740..=809 => GateOp::Advance(a),
                    810..=879 => GateOp::Resize(a),
                    880..=929 => GateOp::Split {
                        permit: a,
                        units: b,
                    },
                    930..=959 => GateOp::Merge { a, b },
                    960..=994 => GateOp::Forget(a),
                    _ => GateOp::Close,
                }
            })
            .collect();
        let case = GateCase {
            capacity,
            budget,
            ops,
        };
        let stats = replay_or_say(
            || replay_gate(&case),
            || format!("gate lifecycle case {case:?} failed"),
        );
        add_gate(&mut total, &stats);
    }
    assert_gate_reaches_everything(&total, "gate lifecycle sweep");
    assert_gate_reaches_lifecycle(&total, "gate lifecycle sweep");
}

/// A named gate case for what the gate refuses and why it sheds: requests above
/// `max_units` (also within the capacity, with the signal fired, on a closed
/// gate), each shed reason of a gate without a target (`NoWait`, `Ceiling` after
/// a wait and at once, `WaitBudget` with and without a ceiling not below the
/// budget), resizes refused in order (0, below `max_units`, closed), and the
/// `ExceedsCapacity` only forgets now bring.
#[test]
fn gate_refusals_and_shed_reasons() {
    use GateOp::*;
    let case = GateCase {
        // Capacity 4 (low bits 3), max_units 2 (bits 3..=6: 1), no target.
        capacity: 3 | 1 << 3,
        // A 10 ms budget.
        budget: 9,
        // Raw units n < 224 are 1 + n % capacity; 230 is capacity + 1.
        ops: vec![
            TryAcquire { units: 1, site: 0 }, // 2 units: admitted
            TryAcquire { units: 2, site: 1 }, // 3 > max_units, within the capacity
            Acquire {
                units: 230,
                site: 2,
                ceiling: None,
            }, // 5 units: above both
            Poll(0),
            Acquire {
                units: 2,
                site: 0,
                ceiling: None,
            }, // 3 units, its signal fired: the refusal wins
            Fire(0),
            Poll(0),
            TryAcquire { units: 1, site: 1 }, // 2 more units: all 4 held
            TryAcquire { units: 0, site: 2 }, // 1 unit: NoWait
            Acquire {
                units: 0,
                site: 0,
                ceiling: Some(5),
            }, // a 5 ms ceiling: Ceiling after 5 ms
            Poll(0),
            Advance(5),
            Poll(0),
            Acquire {
                units: 0,
                site: 1,
                ceiling: Some(0),
            }, // a zero ceiling: Ceiling at once
            Poll(0),
            Acquire {
                units: 0,
                site: 2,
                ceiling: Some(10),
            }, // a ceiling equal to the budget: WaitBudget
            Poll(0),
            Advance(10),
            Poll(0),
            Acquire {
                units: 0,
                site: 0,
                ceiling: None,
            }, // no ceiling: WaitBudget
            Poll(0),
            Advance(10),
            Poll(0),
            Resize(0), // ZeroCapacity
            Resize(1), // CapacityBelowMaxUnits
            Acquire {
                units: 1,
                site: 1,
                ceiling: None,
            }, // 2 units: parks
            Poll(0),
            Forget(0), // capacity 4 -> 2: the parked request still fits
            Forget(0), // capacity 2 -> 0: it fails ExceedsCapacity
            Poll(0),
            TryAcquire { units: 0, site: 2 }, // 1 unit, within max_units: ExceedsCapacity
            Resize(3),                        // 0 -> 3
            Close,
            Resize(4),                        // Closed
            Resize(0),                        // still ZeroCapacity
            Resize(1),                        // still CapacityBelowMaxUnits
            TryAcquire { units: 2, site: 0 }, // 3 units: ExceedsMaxUnits, not Closed
            TryAcquire { units: 0, site: 1 }, // Closed
        ],
    };
    assert_eq!((case.initial_capacity(), case.max_units()), (4, 2));
    let t = replay_gate(&case);
    // As bytes, the same case: a seed for `fuzz/corpus/gate_ops/`, whose other
    // inputs never resize a closed gate.
    let bytes = case.encode();
    assert_eq!(GateCase::decode(&bytes).as_ref(), Some(&case));
    assert_eq!(replay_gate_bytes(&bytes), Some(t));
    check_gate_seed("seed-refusals-and-shed-reasons", &bytes);
    assert_eq!((t.try_admits, t.multi_unit_admits), (2, 2), "{t:?}");
    assert_eq!(
        (
            t.exceeds_max_units,
            t.exceeds_max_units_within_capacity,
            t.exceeds_max_units_fired
        ),
        (4, 3, 1),
        "{t:?}"
    );
    assert_eq!(t.try_sheds, 1, "{t:?}");
    assert_eq!(
        (
            t.sheds,
            t.ceiling_sheds,
            t.sheds_at_once,
            t.budget_sheds,
            t.budget_sheds_with_ceiling
        ),
        (4, 2, 1, 2, 1),
        "{t:?}"
    );
    assert_eq!(
        (
            t.resize_refusals,
            t.resize_below_max_units,
            t.resize_closed,
            t.resize_invalid_while_closed
        ),
        (2, 2, 1, 2),
        "{t:?}"
    );
    assert_eq!((t.grows, t.shrinks), (1, 0), "{t:?}");
    assert_eq!(
        (
            t.forgets,
            t.forgets_below_max_units,
            t.exceeds_after_forget,
            t.oversize,
            t.oversize_at_once
        ),
        (2, 1, 1, 2, 1),
        "{t:?}"
    );
    assert_eq!((t.closed, t.cancels), (1, 0), "{t:?}");
}

/// The raw site byte of site `site` with class `class` (`None`: the site's
/// own, `Critical`).
fn at(site: u8, class: Option<Priority>) -> u8 {
    raw_site(site, class)
}

const SHEDDABLE: Option<Priority> = Some(Priority::Sheddable);
const SHEDDABLE_PLUS: Option<Priority> = Some(Priority::SheddablePlus);
const CRITICAL_PLUS: Option<Priority> = Some(Priority::CriticalPlus);

/// A 1-unit acquire of `class` at site `site`, and its first poll (it is the
/// `index`-th live waiter).
fn parks(site: u8, class: Option<Priority>, index: u8) -> [GateOp; 2] {
    [
        GateOp::Acquire {
            units: 0,
            site: at(site, class),
            ceiling: None,
        },
        GateOp::Poll(index),
    ]
}

/// Replays a named gate case, checks it is its seed file's encoding, and
/// returns its stats.
fn gate_seed(name: &str, case: &GateCase) -> GateStats {
    let stats = replay_gate(case);
    let bytes = case.encode();
    assert_eq!(GateCase::decode(&bytes).as_ref(), Some(case));
    assert_eq!(replay_gate_bytes(&bytes), Some(stats));
    check_gate_seed(name, &bytes);
    stats
}

/// Priority with an overload target: an arrival behind lower classes past the
/// mark (four targets) presses the gate and has them shed, the lowest class
/// first although it came last, enough to wait the target; its admission is
/// no sample of the queue's wait. While still pressed, a later arrival asks for
/// two sheddable units: the head, granted already, keeps its units (a grant
/// wins), the one behind it goes, and the unit the walk cannot find is dropped.
#[test]
fn gate_priority_pressed_arrival_sheds_lower_classes() {
    use GateOp::*;
    let mut ops = Vec::new();
    // Capacity 4; every unit held 40 ms, the mean hold: a unit comes back
    // every 10 ms, the target (a quarter of 64 ms) is 1 unit, the mark 6.
    ops.extend([TryAcquire { units: 0, site: 0 }; 4]);
    ops.extend([Advance(39), Advance(1)]);
    ops.extend(
        [Release {
            permit: 0,
            explicit: false,
        }; 4],
    );
    ops.extend([TryAcquire { units: 0, site: 0 }; 4]);
    // Three `SheddablePlus`, then three `Sheddable`: 6 units, not past the
    // mark.
    for i in 0..3 {
        ops.extend(parks(1, SHEDDABLE_PLUS, i));
    }
    for i in 3..6 {
        ops.extend(parks(2, SHEDDABLE, i));
    }
    // A `Critical` arrival: 7 units behind all, past the mark, 6 past the goal.
    ops.extend(parks(0, None, 6));
    ops.push(RunWoken);
    // A unit back, held the mean hold: the critical waiter is next.
    ops.extend([Advance(39), Advance(1)]);
    ops.push(Release {
        permit: 0,
        explicit: true,
    });
    ops.push(RunWoken);
    // Still pressed (an interval, two mean holds, after the shed): two
    // sheddable waiters, the first granted a unit (held the mean hold), then a
    // critical arrival.
    ops.extend(parks(1, SHEDDABLE, 0));
    ops.extend(parks(2, SHEDDABLE, 1));
    ops.push(Release {
        permit: 0,
        explicit: false,
    });
    ops.extend(parks(0, None, 2));
    ops.push(RunWoken);
    let case = GateCase {
        // Capacity 4 (low bits 3), max_units 1, a target.
        capacity: 0x80 | 3,
        // A 64 ms budget (a 16 ms target), no `max_waiters`.
        budget: 63,
        ops,
    };
    let t = gate_seed("seed-priority-pressed-arrival", &case);
    assert_eq!((t.pressed_sheds, t.outranked), (2, 7), "{t:?}");
    assert_eq!(t.outranked_others_admits, 1, "{t:?}");
    assert_eq!(
        (t.admits_below_critical, t.shed_units_not_found),
        (1, 1),
        "{t:?}"
    );
}

/// Priority with `max_waiters` (2) and no target: an arrival at a full queue
/// takes the place of the oldest waiter of the lowest class below its own;
/// with nobody below it, it is `QueueFull`, and a lower class never sheds a
/// higher one. A waiter so shed that sees its signal first, or is dropped,
/// counts nothing.
#[test]
fn gate_priority_full_queue_sheds_the_lowest_class_parked() {
    use GateOp::*;
    let mut ops = vec![TryAcquire { units: 0, site: 0 }];
    ops.extend(parks(0, SHEDDABLE_PLUS, 0));
    ops.extend(parks(1, None, 1));
    // Full: the `SheddablePlus` waiter goes for a `CriticalPlus` arrival.
    ops.extend(parks(2, CRITICAL_PLUS, 2));
    // Nobody below `Critical` left (the shed one is on its way out), and
    // nobody below `Sheddable` ever.
    ops.extend(parks(0, None, 3));
    ops.extend(parks(1, SHEDDABLE, 3));
    ops.push(RunWoken);
    // Served in arrival order, across classes.
    ops.push(Release {
        permit: 0,
        explicit: false,
    });
    ops.push(RunWoken);
    ops.push(Release {
        permit: 0,
        explicit: false,
    });
    ops.push(RunWoken);
    // Two more evictions, of a waiter whose signal fires first and of one
    // dropped before it sees the shed.
    ops.extend(parks(0, SHEDDABLE, 0));
    ops.extend(parks(1, SHEDDABLE, 1));
    ops.extend(parks(2, None, 2));
    ops.push(Fire(0));
    ops.push(Poll(0));
    ops.extend(parks(0, None, 2));
    ops.push(Drop(0));
    ops.push(RunWoken);
    let case = GateCase {
        // Capacity 1, max_units 1, no target.
        capacity: 0,
        // A 40 ms budget, `max_waiters` 2 (top bits 2).
        budget: 0x80 | 39,
        ops,
    };
    assert_eq!(case.max_waiters(), Some(2));
    let t = gate_seed("seed-priority-full-queue", &case);
    assert_eq!((t.evictions, t.queue_full), (3, 2), "{t:?}");
    assert_eq!(
        (t.outranked, t.outranked_cancelled, t.outranked_dropped),
        (1, 1, 1),
        "{t:?}"
    );
    assert_eq!(t.admits_critical_plus, 1, "{t:?}");
}

/// Priority at the overload cap: an overloaded waiter at its cap sheds a lower
/// class of its own size instead of itself and waits on; a recheck later, with
/// nobody below it left, it is shed itself (`Overload`).
#[test]
fn gate_priority_overload_cap_sheds_a_lower_class_first() {
    use GateOp::*;
    let mut ops = vec![TryAcquire { units: 0, site: 0 }];
    ops.extend(parks(0, None, 0));
    // The unit back after 20 ms (the mean hold): the waiter admitted after
    // 20 ms opens CoDel's interval (two mean holds).
    ops.push(Advance(20));
    ops.push(Release {
        permit: 0,
        explicit: false,
    });
    ops.push(Poll(0));
    // Two `Critical` waiters and a `Sheddable` one behind them.
    ops.extend(parks(0, None, 0));
    ops.extend(parks(1, None, 1));
    ops.extend(parks(2, SHEDDABLE, 2));
    ops.push(Advance(39));
    ops.push(Advance(1));
    // After 40 ms (a 30 ms mean hold now), the first is admitted: the
    // interval's shortest wait was 20 ms, above the 16 ms target.
    ops.push(Release {
        permit: 0,
        explicit: false,
    });
    ops.push(Poll(0));
    // The second, 40 ms parked, is past its cap (32 ms): the sheddable goes.
    ops.push(Poll(0));
    ops.push(RunWoken);
    // A recheck (the target) later, nobody below it: shed itself.
    ops.push(Advance(16));
    ops.push(RunWoken);
    let case = GateCase {
        // Capacity 1, max_units 1, a target.
        capacity: 0x80,
        // A 64 ms budget (a 16 ms target).
        budget: 63,
        ops,
    };
    let t = gate_seed("seed-priority-overload-cap", &case);
    assert_eq!((t.cap_sheds, t.outranked), (1, 1), "{t:?}");
    assert_eq!((t.overload_sheds, t.cap_sheds_then_self), (1, 1), "{t:?}");
}

/// The shed walk past a full wake batch: an arrival has more waiters shed
/// than one pass wakes. The pass that fills the batch ends, and the next
/// grants before it walks on: the waiter the free unit fits, which the walk
/// would have reached next, is granted (a grant wins), and the walk takes the
/// one behind it.
#[test]
fn gate_priority_shed_walk_goes_on_after_a_full_wake_batch() {
    use GateOp::*;
    // Capacity 8, every unit held 12 ms (a unit back every 1.5 ms): the mark
    // (the 64 ms budget) is 42 units, the target (16 ms) 10.
    let mut ops = vec![TryAcquire { units: 0, site: 0 }; 8];
    ops.push(Advance(12));
    ops.extend(
        [Release {
            permit: 0,
            explicit: false,
        }; 8],
    );
    // One unit free: a 2-unit sheddable head that it does not fit, and 41
    // sheddable waiters of one unit behind it (no barging), 42 units short.
    ops.extend([TryAcquire { units: 0, site: 0 }; 7]);
    ops.extend([
        Acquire {
            units: 1,
            site: at(0, SHEDDABLE),
            ceiling: None,
        },
        Poll(0),
    ]);
    for i in 1..=41 {
        ops.extend(parks(1, SHEDDABLE, i));
    }
    // A 2-unit critical arrival: 44 units behind all, past the mark, 34 past
    // the goal: the head and 31 more (33 units, 32 wakes) fill the batch.
    ops.extend([
        Acquire {
            units: 1,
            site: 0,
            ceiling: None,
        },
        Poll(42),
    ]);
    ops.push(RunWoken);
    let case = GateCase {
        // Capacity 8 (low bits 7), max_units 2 (bits 3..=6: 1), a target.
        capacity: 0x80 | 1 << 3 | 7,
        // A 64 ms budget, no `max_waiters`.
        budget: 63,
        ops,
    };
    assert_eq!((case.initial_capacity(), case.max_units()), (8, 2));
    let t = gate_seed("seed-priority-walk-past-a-full-batch", &case);
    assert_eq!((t.pressed_sheds, t.walks_cut_by_batch), (1, 1), "{t:?}");
    assert_eq!((t.outranked, t.admits_below_critical), (33, 1), "{t:?}");
}

/// The memory watch: a working set of 8 of a 16-unit limit gives the classes
/// levels of 4, 4, 5 and 6 units (their marks, 75 % to 90 %, less the working
/// set), so the capacity in force falls from 8 to 6, and 6 admissions until
/// the next reading (fresh units under the highest mark). A fifth `Sheddable`
/// unit is shed for memory past its level (`try_acquire`), a sixth `Critical`
/// one too (a first poll), while `CriticalPlus`, whose level is the capacity
/// in force, takes the last admission and then finds them spent (shed for
/// memory, not `NoWait`). The buffers fill past what was counted (14.75 with 6
/// units in use): the capacity falls to 5 below the 6 in use, revoking
/// nothing; a resize above it changes nothing in force; two releases pay the
/// shrink. The source fails: every class unbound, the capacity is the
/// configured 10.
#[test]
fn gate_memory_watch_sheds_past_each_mark_and_follows_the_readings() {
    use GateOp::*;
    let critical = |index| {
        [
            Acquire {
                units: 0,
                site: at(1, None),
                ceiling: None,
            },
            Poll(index),
        ]
    };
    let mut ops = vec![
        // A working set of 8 (32 quarters) against 16 units, read at 10 ms.
        Memory(32),
        Advance(10),
    ];
    ops.extend(
        [TryAcquire {
            units: 0,
            site: at(0, SHEDDABLE),
        }; 5],
    );
    ops.extend(critical(0));
    ops.extend(critical(0));
    ops.extend(
        [TryAcquire {
            units: 0,
            site: at(2, CRITICAL_PLUS),
        }; 2],
    );
    // 14.75 (59 quarters) with 6 in use: 8.75 beyond the units.
    ops.extend([Memory(59), Advance(10), Resize(10)]);
    ops.extend(
        [Release {
            permit: 0,
            explicit: false,
        }; 2],
    );
    // The source fails (60 and above).
    ops.extend([Memory(60), Advance(10)]);
    let case = GateCase {
        // Capacity 8 (low bits 7), max_units 2 (bits 3..=6: 1), no target.
        capacity: 7 | 1 << 3,
        budget: 63,
        ops,
    };
    let t = gate_seed("seed-memory-watch", &case);
    // The first reading (at the build, before the source is set) and three.
    assert_eq!(
        (t.memory_readings, t.memory_unbound_readings),
        (4, 2),
        "{t:?}"
    );
    assert_eq!((t.memory_lowered, t.memory_raised), (2, 1), "{t:?}");
    assert_eq!((t.memory_sheds, t.memory_sheds_try), (3, 2), "{t:?}");
    assert_eq!(
        (t.memory_admissions_bound, t.memory_admissions_spent),
        (2, 1),
        "{t:?}"
    );
    assert_eq!((t.memory_bound_admits, t.try_sheds), (5, 0), "{t:?}");
    assert_eq!((t.try_admits, t.immediate_admits), (5, 1), "{t:?}");
    // The fall to 6 retires 2 units at once, the one to 5 one as it comes back.
    assert_eq!(t.retired_units, 3, "{t:?}");
}

/// The memory watch's admissions are taken by admissions only. A working set
/// of 10 of a 24-unit limit leaves the admissions unbound (11 fresh units
/// under the highest mark, 21.6, for a configured 8), and 4 units are admitted;
/// their buffers fill (14), so the next reading binds them at 7 (21.6 − 14),
/// the levels (8 to 11) all at or above the capacity of 8. Another 4 take 4 of
/// them; a `try_acquire` of 2 that finds the units taken (`NoWait`) and an
/// acquire of 2 that parks take none, so 3 are left. A release grants the
/// waiter, whose admission (when it is polled) takes 2: one `try_acquire` of 2
/// finds one left (shed for memory), one of 1 takes it. The next reading counts
/// the 7 admitted since (given less left), with the 7 in use owed no room
/// under the mark but a probe (the working set held still).
#[test]
fn gate_memory_admissions_are_taken_by_admissions_only() {
    use GateOp::*;
    let site = at(0, CRITICAL_PLUS);
    // Units of a gate of 8: `1 + raw % 8`.
    let take = |units: u8| TryAcquire {
        units: units - 1,
        site,
    };
    let ops = vec![
        // A limit of 24 units (the top bits 3), a working set of 10 (40 quarters).
        Memory(3 << 6 | 40),
        Advance(10),
        take(4),
        // The 4 units' buffers fill: 14 (56 quarters).
        Memory(3 << 6 | 56),
        Advance(10),
        take(4),
        take(2),
        Acquire {
            units: 1,
            site,
            ceiling: None,
        },
        Poll(0),
        Release {
            permit: 0,
            explicit: true,
        },
        Poll(0),
        take(2),
        take(1),
        Advance(10),
    ];
    let case = GateCase {
        // Capacity 8 (low bits 7), max_units 4 (bits 3..=6: 3), no target.
        capacity: 7 | 3 << 3,
        budget: 63,
        ops,
    };
    let t = gate_seed("seed-memory-admissions", &case);
    assert_eq!(
        (
            t.memory_readings,
            t.memory_admissions_bound,
            t.memory_probes
        ),
        (4, 2, 1),
        "{t:?}"
    );
    assert_eq!(
        (t.try_admits, t.try_sheds, t.parked_admits),
        (3, 1, 1),
        "{t:?}"
    );
    assert_eq!(
        (
            t.memory_sheds,
            t.memory_admissions_spent,
            t.memory_sheds_try
        ),
        (1, 1, 1),
        "{t:?}"
    );
    assert_eq!(
        (t.memory_admissions_untaken, t.memory_parked_admissions),
        (2, 1),
        "{t:?}"
    );
    assert_eq!((t.memory_lowered, t.memory_raised), (0, 0), "{t:?}");
}

/// A hand-written gate seed: written with `ADMIT_WRITE_SEEDS=1`; once in
/// `fuzz/corpus/gate_ops/`, it must stay the encoding of its case.
fn check_gate_seed(name: &str, bytes: &[u8]) {
    if cfg!(miri) {
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus/gate_ops")
        .join(name);
    if std::env::var_os("ADMIT_WRITE_SEEDS").is_some() {
        std::fs::write(&path, bytes).expect("writing a seed");
    }
    if let Ok(file) = std::fs::read(&path) {
        assert_eq!(
            file,
            bytes,
            "{} is not the encoding of its case",
            path.display()
        );
    }
}

/// Go's `x/sync/semaphore` bug: a cancelled waiter at the head must not strand the
/// smaller waiters behind it.
#[test]
fn cancelled_head_does_not_strand_followers() {
    use Op::*;
    let stats = replay(
        3,
        &[
            TryAcquire {
                units: 1,
                owned: false,
            }, // 2 units: held, 1 free
            Acquire {
                units: 2,
                owned: false,
            }, // 3 units: parks
            Poll(0),
            Acquire {
                units: 0,
                owned: true,
            }, // 1 unit: parks behind the head
            Poll(1),
            Drop(0), // the head leaves: the 1-unit waiter is woken
            Poll(0),
        ],
    );
    assert_eq!(stats.dropped_head_with_followers, 1);
    assert_eq!(stats.queued_grants, 1);
}

/// A waiter granted but dropped before it was polled again gives its units on to
/// the next waiter.
#[test]
fn granted_then_dropped_hands_units_on() {
    use Op::*;
    let stats = replay(
        2,
        &[
            TryAcquire {
                units: 1,
                owned: true,
            }, // 2 units, all of them
            Acquire {
                units: 0,
                owned: false,
            }, // 1 unit
            Poll(0),
            Acquire {
                units: 0,
                owned: true,
            },
            Poll(1),
            Release {
                permit: 0,
                explicit: true,
            }, // both fit: both woken
            Drop(0), // granted, never re-polled
            RunWoken,
        ],
    );
    assert_eq!(stats.dropped_granted, 1);
    assert_eq!(stats.queued_grants, 2);
}

/// A close with more parked waiters than one wake batch wakes them all.
#[test]
fn close_wakes_more_than_one_batch() {
    use Op::*;
    let mut ops = vec![TryAcquire {
        units: 0,
        owned: false,
    }];
    for i in 0..70u8 {
        ops.push(Acquire {
            units: 0,
            owned: i % 3 == 0,
        });
        ops.push(Poll(i));
    }
    ops.push(Close);
    ops.push(RunWoken);
    let stats = replay(1, &ops);
    assert_eq!(stats.max_parked, 70);
    assert_eq!(stats.closed_wakes, 70);
}

/// A release that lets many small waiters in at once wakes all of them, in more
/// than one batch, and none behind the first waiter that does not fit.
#[test]
fn release_wakes_every_fitting_waiter_and_no_other() {
    use Op::*;
    // Capacity 40 (raw 9); raw units n < 40 map to n + 1 units.
    let mut ops = vec![TryAcquire {
        units: 39,
        owned: false,
    }];
    for i in 0..36u8 {
        ops.push(Acquire {
            units: 0,
            owned: i % 2 == 0,
        });
        ops.push(Poll(i));
    }
    ops.extend([
        Acquire {
            units: 39,
            owned: false,
        }, // 40 units: will not fit
        Poll(36),
        Acquire {
            units: 4,
            owned: false,
        }, // 5 units, behind it: must not be woken
        Poll(37),
        Release {
            permit: 0,
            explicit: false,
        },
        RunWoken,
    ]);
    let stats = replay(9, &ops);
    assert_eq!(stats.queued_grants, 36);
}

/// A parked waiter re-polled with a new waker is woken through the new one only.
#[test]
fn repoll_with_new_waker_moves_the_wake() {
    use Op::*;
    let stats = replay(
        1,
        &[
            TryAcquire {
                units: 0,
                owned: false,
            },
            Acquire {
                units: 0,
                owned: false,
            },
            Poll(0),
            PollNewWaker(0),
            Release {
                permit: 0,
                explicit: false,
            },
            RunWoken,
        ],
    );
    assert_eq!(stats.waker_replacements, 1);
    assert_eq!(stats.queued_grants, 1);
}

/// The hand-written seeds of `fuzz/corpus/semaphore_ops/seed-*`: one case each,
/// named, so the file's bytes can be checked against what they mean.
fn seeds() -> Vec<(&'static str, Case)> {
    use Op::*;
    vec![
        (
            // Capacity 4. A shrink below the units in use retires the free unit at
            // once and the rest as they return, granting nothing meanwhile; a split
            // and a refused split; a drain that waits for the last unit.
            "shrink-below-use",
            Case {
                capacity: 4,
                ops: vec![
                    TryAcquire {
                        units: 2,
                        owned: false,
                    }, // 3 units held, 1 free
                    Acquire {
                        units: 1,
                        owned: true,
                    }, // 2 units: parks
                    Poll(0),
                    Acquire {
                        units: 0,
                        owned: false,
                    }, // 1 unit: parks behind it
                    Poll(1),
                    SetCapacity(1), // 4 -> 2: the free unit retires, 1 more owed
                    TryAcquire {
                        units: 0,
                        owned: false,
                    }, // refused: a unit is owed
                    Split {
                        permit: 0,
                        units: 0,
                    }, // 3 -> 2 + 1
                    Split {
                        permit: 0,
                        units: 1,
                    }, // 2 units of a 2-unit permit: None
                    Release {
                        permit: 1,
                        explicit: true,
                    }, // the 1 returned pays the debt: nobody granted
                    Release {
                        permit: 0,
                        explicit: false,
                    }, // 2 back: the head (2) is granted, not the 1 behind
                    RunWoken,
                    Drain,   // closes: the 1-unit waiter is woken with Closed
                    Poll(1), // the drain: 2 units out, parks
                    RunWoken,
                    Release {
                        permit: 0,
                        explicit: false,
                    }, // the last units back: the drain is granted
                    RunWoken,
                ],
            },
        ),
        (
            // Capacity 40. A shrink to 20 with everything held fails the 30-unit
            // waiter behind the head at once; the release pays 20 to the
            // retirement and grants the 10 and the 5; a grow; a close.
            "shrink-fails-behind-head",
            Case {
                capacity: 9,
                ops: vec![
                    TryAcquire {
                        units: 39,
                        owned: false,
                    }, // all 40
                    Acquire {
                        units: 9,
                        owned: false,
                    }, // 10
                    Poll(0),
                    Acquire {
                        units: 29,
                        owned: true,
                    }, // 30
                    Poll(1),
                    Acquire {
                        units: 4,
                        owned: false,
                    }, // 5
                    Poll(2),
                    SetCapacity(148), // 40 -> 20
                    RunWoken,
                    Release {
                        permit: 0,
                        explicit: false,
                    },
                    RunWoken,
                    SetCapacity(158), // 20 -> 30
                    Close,
                ],
            },
        ),
        (
            // Capacity 2. Grows let parked waiters in, in FIFO order; owned permits
            // merge; forgets lower the capacity, the second one below a parked
            // request, which fails; a drain of an idle semaphore is ready at once.
            "grow-merge-forget",
            Case {
                capacity: 2,
                ops: vec![
                    TryAcquire {
                        units: 1,
                        owned: false,
                    }, // both units
                    Acquire {
                        units: 1,
                        owned: true,
                    }, // 2: parks
                    Poll(0),
                    Acquire {
                        units: 0,
                        owned: true,
                    }, // 1: parks behind
                    Poll(1),
                    AddUnits(1),    // capacity 3, 1 free: the head needs 2
                    SetCapacity(4), // 3 -> 4: the head is granted
                    AddUnits(1),    // capacity 5: the 1-unit waiter is granted
                    RunWoken,
                    Merge { a: 1, b: 0 }, // the two owned permits: 2 + 1
                    Forget(0),            // the borrowed 2: capacity 3
                    Acquire {
                        units: 223,
                        owned: false,
                    }, // 2: parks (nothing free)
                    Poll(0),
                    Forget(0), // the owned 3: capacity 0, the 2-unit waiter fails
                    RunWoken,
                    Drain,
                    Poll(0), // every unit is back: ready at once
                ],
            },
        ),
    ]
}

/// Each seed file is exactly its named case's encoding, and decodes back to it.
/// `ADMIT_WRITE_SEEDS=1` (re)writes the files.
#[test]
#[cfg_attr(miri, ignore = "reads files, which miri's isolation forbids")]
fn seed_files_are_the_named_cases() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/semaphore_ops");
    for (name, case) in seeds() {
        let bytes = case.encode();
        assert_eq!(Case::decode(&bytes).as_ref(), Some(&case), "{name}");
        let path = dir.join(format!("seed-{name}"));
        if std::env::var_os("ADMIT_WRITE_SEEDS").is_some() {
            std::fs::write(&path, &bytes).expect("writing a seed");
        }
        let file = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(
            file,
            bytes,
            "{} is not the encoding of its case",
            path.display()
        );
    }
}

fn seed(name: &str) -> Stats {
    let (_, case) = seeds()
        .into_iter()
        .find(|(n, _)| *n == name)
        .expect("a seed of that name");
    replay_case(&case)
}

/// A shrink below the units in use: nothing is granted until the debt is paid.
#[test]
fn shrink_below_use_retires_returning_units_before_granting() {
    let stats = seed("shrink-below-use");
    assert_eq!(stats.shrinks_with_debt, 1);
    assert_eq!(stats.retired_units, 2);
    assert_eq!(stats.retired_later, 1);
    assert_eq!(stats.refused_for_debt, 1);
    assert_eq!((stats.splits, stats.split_refusals), (1, 1));
    assert_eq!(stats.queued_grants, 1);
    assert_eq!(stats.closed_wakes, 1);
    assert_eq!(stats.drains_waited, 1);
}

/// A shrink fails a parked request above the new capacity wherever it waits, and
/// the waiters around it are granted once the debt is paid.
#[test]
fn shrink_fails_oversize_waiters_behind_the_head() {
    let stats = seed("shrink-fails-behind-head");
    assert_eq!(stats.exceeds_after_shrink, 1);
    assert_eq!(stats.exceeds_behind_head, 1);
    assert_eq!(stats.retired_units, 20);
    assert_eq!(stats.queued_grants, 2);
    assert_eq!((stats.shrinks, stats.grows), (1, 1));
}

/// Grows serve the queue in FIFO order; a forget below a parked request fails it.
#[test]
fn grows_serve_in_order_and_forgets_fail_what_no_longer_fits() {
    let stats = seed("grow-merge-forget");
    assert_eq!(stats.grows, 3);
    assert_eq!(stats.grants_by_grow, 2);
    assert_eq!(stats.merges, 1);
    assert_eq!(stats.forgets, 2);
    assert_eq!(stats.exceeds_after_shrink, 1);
    assert_eq!(stats.forget_wakes, 1);
    assert_eq!(stats.drains_at_once, 1);
}

fn add(total: &mut Stats, s: &Stats) {
    total.ops += s.ops;
    total.immediate_grants += s.immediate_grants;
    total.queued_grants += s.queued_grants;
    total.closed_wakes += s.closed_wakes;
    total.try_grants += s.try_grants;
    total.try_refusals += s.try_refusals;
    total.oversize += s.oversize;
    total.dropped_fresh += s.dropped_fresh;
    total.dropped_parked += s.dropped_parked;
    total.dropped_head_with_followers += s.dropped_head_with_followers;
    total.dropped_granted += s.dropped_granted;
    total.waker_replacements += s.waker_replacements;
    total.max_parked = total.max_parked.max(s.max_parked);
    total.grows += s.grows;
    total.shrinks += s.shrinks;
    total.shrinks_with_debt += s.shrinks_with_debt;
    total.retired_units += s.retired_units;
    total.retired_later += s.retired_later;
    total.grants_by_grow += s.grants_by_grow;
    total.exceeds_after_shrink += s.exceeds_after_shrink;
    total.exceeds_behind_head += s.exceeds_behind_head;
    total.refused_for_debt += s.refused_for_debt;
    total.splits += s.splits;
    total.split_refusals += s.split_refusals;
    total.merges += s.merges;
    total.forgets += s.forgets;
    total.forget_wakes += s.forget_wakes;
    total.drains_at_once += s.drains_at_once;
    total.drains_waited += s.drains_waited;
}

/// Sweep sizes: full on a normal run, a token few under miri (which runs every
/// op thousands of times slower, and only needs to see the unsafe paths once).
fn scaled(n: usize) -> usize {
    if cfg!(miri) {
        n / 200
    } else {
        n
    }
}

/// `scaled(n)`, but `factor` times `n` outside miri: a sweep lengthened only
/// for the reach assertions, which miri skips.
fn scaled_for_reach(n: usize, factor: usize) -> usize {
    if cfg!(miri) {
        scaled(n)
    } else {
        n * factor
    }
}

/// The replays were not vacuous: every kind of event happened at least once.
/// (Not checked under miri, whose sweeps are too small to reach everything.)
fn assert_reaches_everything(t: &Stats, what: &str) {
    if cfg!(miri) {
        return;
    }
    let reached = [
        ("immediate grants", t.immediate_grants),
        ("queued grants", t.queued_grants),
        ("closed wakes", t.closed_wakes),
        ("try grants", t.try_grants),
        ("try refusals", t.try_refusals),
        ("oversize refusals", t.oversize),
        ("fresh drops", t.dropped_fresh),
        ("parked drops", t.dropped_parked),
        ("head drops with followers", t.dropped_head_with_followers),
        ("granted drops", t.dropped_granted),
        ("waker replacements", t.waker_replacements),
    ];
    for (name, n) in reached {
        assert!(n > 0, "the {what} never reached {name}: {t:?}");
    }
    assert!(
        t.max_parked >= 3,
        "the {what} never parked 3 waiters: {t:?}"
    );
    eprintln!("{what}: {t:?}");
}

/// The lifecycle operations were reached too: resizes both ways, units retired
/// as they came back, waiters failed by a shrink (also behind the head) and let
/// in by a grow, requests held back by a debt, splits (and refused ones),
/// merges, forgets that woke someone, and drains both ready at once and waited.
fn assert_reaches_lifecycle(t: &Stats, what: &str) {
    if cfg!(miri) {
        return;
    }
    let reached = [
        ("grows", t.grows),
        ("shrinks", t.shrinks),
        ("shrinks with debt", t.shrinks_with_debt),
        ("retired units", t.retired_units),
        ("units retired on return", t.retired_later),
        ("grants by a grow", t.grants_by_grow),
        ("exceeds after a shrink", t.exceeds_after_shrink),
        ("exceeds behind the head", t.exceeds_behind_head),
        ("requests held back by a debt", t.refused_for_debt),
        ("splits", t.splits),
        ("split refusals", t.split_refusals),
        ("merges", t.merges),
        ("forgets", t.forgets),
        ("wakes by a forget", t.forget_wakes),
        ("drains ready at once", t.drains_at_once),
        ("drains that waited", t.drains_waited),
    ];
    for (name, n) in reached {
        assert!(n > 0, "the {what} never reached {name}: {t:?}");
    }
}

fn add_gate(total: &mut GateStats, s: &GateStats) {
    total.ops += s.ops;
    total.immediate_admits += s.immediate_admits;
    total.parked_admits += s.parked_admits;
    total.admits_at_deadline += s.admits_at_deadline;
    total.multi_unit_admits += s.multi_unit_admits;
    total.sheds += s.sheds;
    total.budget_sheds += s.budget_sheds;
    total.budget_sheds_with_ceiling += s.budget_sheds_with_ceiling;
    total.ceiling_sheds += s.ceiling_sheds;
    total.sheds_at_once += s.sheds_at_once;
    total.try_sheds += s.try_sheds;
    total.try_admits += s.try_admits;
    total.cancels += s.cancels;
    total.cancels_after_grant += s.cancels_after_grant;
    total.closed += s.closed;
    total.exceeds_max_units += s.exceeds_max_units;
    total.exceeds_max_units_within_capacity += s.exceeds_max_units_within_capacity;
    total.exceeds_max_units_fired += s.exceeds_max_units_fired;
    total.oversize += s.oversize;
    total.oversize_at_once += s.oversize_at_once;
    total.deadline_wakes += s.deadline_wakes;
    total.dropped_parked_or_granted += s.dropped_parked_or_granted;
    total.grows += s.grows;
    total.shrinks += s.shrinks;
    total.resize_refusals += s.resize_refusals;
    total.resize_below_max_units += s.resize_below_max_units;
    total.resize_closed += s.resize_closed;
    total.resize_invalid_while_closed += s.resize_invalid_while_closed;
    total.retired_units += s.retired_units;
    total.exceeds_after_forget += s.exceeds_after_forget;
    total.splits += s.splits;
    total.merges += s.merges;
    total.merges_across_sources += s.merges_across_sources;
    total.forgets += s.forgets;
    total.forgets_below_max_units += s.forgets_below_max_units;
    total.hopeless += s.hopeless;
    total.overload_sheds += s.overload_sheds;
    total.overload_changes += s.overload_changes;
    total.admits_below_critical += s.admits_below_critical;
    total.admits_critical_plus += s.admits_critical_plus;
    total.outranked += s.outranked;
    total.outranked_cancelled += s.outranked_cancelled;
    total.outranked_dropped += s.outranked_dropped;
    total.pressed_sheds += s.pressed_sheds;
    total.cap_sheds += s.cap_sheds;
    total.cap_sheds_then_self += s.cap_sheds_then_self;
    total.outranked_others_admits += s.outranked_others_admits;
    total.evictions += s.evictions;
    total.queue_full += s.queue_full;
    total.shed_units_not_found += s.shed_units_not_found;
    total.walks_cut_by_batch += s.walks_cut_by_batch;
    total.memory_sets += s.memory_sets;
    total.memory_readings += s.memory_readings;
    total.memory_unbound_readings += s.memory_unbound_readings;
    total.memory_lowered += s.memory_lowered;
    total.memory_raised += s.memory_raised;
    total.memory_floored += s.memory_floored;
    total.memory_forgets_kept += s.memory_forgets_kept;
    total.memory_sheds += s.memory_sheds;
    total.memory_sheds_try += s.memory_sheds_try;
    total.memory_sheds_critical_plus += s.memory_sheds_critical_plus;
    total.memory_closed_refusals += s.memory_closed_refusals;
    total.memory_oversize_try += s.memory_oversize_try;
    total.memory_admissions_untaken += s.memory_admissions_untaken;
    total.memory_parked_admissions += s.memory_parked_admissions;
    total.memory_bound_admits += s.memory_bound_admits;
    total.memory_watch_ends += s.memory_watch_ends;
    total.memory_admissions_bound += s.memory_admissions_bound;
    total.memory_probes += s.memory_probes;
    total.memory_admissions_spent += s.memory_admissions_spent;
}

/// The gate replays were not vacuous: every outcome of an acquire was reached,
/// every shed reason both in the error and in `on_shed`, multi-unit admissions,
/// refusals above `max_units` (also of requests the capacity would fit, and of
/// ones whose signal had fired), and the priority rules: admissions of the
/// classes below and above the default, waiters shed for a higher class (also
/// ones signalled or dropped before they saw it), lower classes shed for an
/// arrival while pressed and at the overload cap, the admissions of those that
/// shed them, and a full `max_waiters` queue that sheds a lower class or the
/// arrival.
fn assert_gate_reaches_everything(t: &GateStats, what: &str) {
    if cfg!(miri) {
        return;
    }
    let reached = [
        ("immediate admits", t.immediate_admits),
        ("parked admits", t.parked_admits),
        ("multi-unit admits", t.multi_unit_admits),
        ("sheds", t.sheds),
        ("wait budget sheds", t.budget_sheds),
        (
            "wait budget sheds with a ceiling not below the budget",
            t.budget_sheds_with_ceiling,
        ),
        ("ceiling sheds", t.ceiling_sheds),
        ("sheds at once", t.sheds_at_once),
        ("try sheds (no wait)", t.try_sheds),
        ("try admits", t.try_admits),
        ("cancels", t.cancels),
        ("closed", t.closed),
        ("refusals above max_units", t.exceeds_max_units),
        (
            "refusals above max_units within the capacity",
            t.exceeds_max_units_within_capacity,
        ),
        (
            "refusals above max_units with the signal fired",
            t.exceeds_max_units_fired,
        ),
        ("deadline wakes", t.deadline_wakes),
        ("parked or granted drops", t.dropped_parked_or_granted),
        ("sheds at arrival by the estimate", t.hopeless),
        ("sheds at the overload cap", t.overload_sheds),
        ("changes of the overload state", t.overload_changes),
        ("admits below Critical", t.admits_below_critical),
        ("admits of CriticalPlus", t.admits_critical_plus),
        ("waiters shed for a higher class", t.outranked),
        (
            "lower classes shed for an arrival while pressed",
            t.pressed_sheds,
        ),
        (
            "admissions of waiters that shed lower classes",
            t.outranked_others_admits,
        ),
        ("evictions from a full queue", t.evictions),
        ("sheds of a full queue", t.queue_full),
    ];
    for (name, n) in reached {
        assert!(n > 0, "the {what} never reached {name}: {t:?}");
    }
    assert_eq!(t.sheds, t.budget_sheds + t.ceiling_sheds, "{what}: {t:?}");
    eprintln!("{what}: {t:?}");
}

/// A waiter at the overload cap shed a lower class rather than itself: not of
/// the random and lifecycle sweeps, whose overloads are rare (the lifecycle's
/// resizes and forgets keep the capacity higher).
fn assert_gate_reaches_the_cap_shed(t: &GateStats, what: &str) {
    assert!(
        cfg!(miri) || t.cap_sheds > 0,
        "the {what} never reached lower classes shed at the overload cap: {t:?}"
    );
}

/// The gate's lifecycle operations were reached: resizes both ways, refused ones
/// (to 0, below `max_units`, of a closed gate, and invalid ones of a closed gate,
/// refused for the capacity), units retired, splits, merges (across sources too),
/// forgets (also below `max_units`), and what only a forget now brings:
/// `ExceedsCapacity`, at once and of a parked acquire.
fn assert_gate_reaches_lifecycle(t: &GateStats, what: &str) {
    if cfg!(miri) {
        return;
    }
    let reached = [
        ("grows", t.grows),
        ("shrinks", t.shrinks),
        ("refused resizes to 0", t.resize_refusals),
        ("refused resizes below max_units", t.resize_below_max_units),
        ("refused resizes of a closed gate", t.resize_closed),
        (
            "invalid resizes of a closed gate",
            t.resize_invalid_while_closed,
        ),
        ("retired units", t.retired_units),
        ("oversize", t.oversize),
        ("oversize at once", t.oversize_at_once),
        ("exceeds after a forget", t.exceeds_after_forget),
        ("splits", t.splits),
        ("merges", t.merges),
        ("merges across sources", t.merges_across_sources),
        ("forgets", t.forgets),
        ("forgets below max_units", t.forgets_below_max_units),
    ];
    for (name, n) in reached {
        assert!(n > 0, "the {what} never reached {name}: {t:?}");
    }
}

/// The memory watch was reached: readings, failed ones, readings that lowered
/// and raised the capacity in force, sheds for memory (of `try_acquire` too),
/// admissions at once within a class's allowance below the capacity, and each
/// place where a forget, a close, the capacity or an admission decides
/// against the watch's bounds.
fn assert_gate_reaches_memory(t: &GateStats, what: &str) {
    if cfg!(miri) {
        return;
    }
    let reached = [
        ("memory readings", t.memory_readings),
        ("failed memory readings", t.memory_unbound_readings),
        ("readings that lowered the capacity", t.memory_lowered),
        ("readings that raised the capacity", t.memory_raised),
        ("sheds for memory", t.memory_sheds),
        ("sheds for memory of try_acquire", t.memory_sheds_try),
        (
            "readings that bound the admissions",
            t.memory_admissions_bound,
        ),
        ("sheds for admissions spent", t.memory_admissions_spent),
        ("admissions within an allowance", t.memory_bound_admits),
        // Where the gate's rules decide against what the watch alone would
        // say: a reading a forget's units stay out of, an arrival on a closed
        // gate, a `try_acquire` above the capacity, an arrival within the
        // admissions turned away or parked, a parked admission against them.
        (
            "readings after a forget that keep it",
            t.memory_forgets_kept,
        ),
        (
            "arrivals refused Closed that memory would shed",
            t.memory_closed_refusals,
        ),
        (
            "try_acquires refused ExceedsCapacity that memory would shed",
            t.memory_oversize_try,
        ),
        (
            "arrivals within the admissions not admitted at once",
            t.memory_admissions_untaken,
        ),
        ("parked admissions against them", t.memory_parked_admissions),
    ];
    for (name, n) in reached {
        assert!(n > 0, "the {what} never reached {name}: {t:?}");
    }
}

/// xorshift64: a tiny deterministic generator for the sweep.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
