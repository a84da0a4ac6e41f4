//! Replays the fuzz corpus and a bounded random sweep against the reference model
//! (`tests/model/mod.rs`) on stable, so CI exercises the `semaphore_ops` fuzz
//! target without nightly. Also holds named regression sequences.
// Needs the `alloc` feature (the feature powerset builds every test target).
#![cfg(feature = "alloc")]
// Test code, never built without std: the `core`/`alloc` path lints do not apply.
#![allow(clippy::std_instead_of_core, clippy::std_instead_of_alloc)]

mod model;

use std::path::Path;

use model::gate::{replay_gate, replay_gate_bytes, GateCase, GateOp, GateStats};
use model::{replay, replay_bytes, Op, Stats};

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
        let outcome = std::panic::catch_unwind(|| replay_bytes(&data));
        match outcome {
            Ok(Some(stats)) => add(&mut total, &stats),
            Ok(None) => {}
            Err(panic) => {
                eprintln!("sweep input failed: {data:02x?}");
                std::panic::resume_unwind(panic);
            }
        }
    }
    assert_reaches_everything(&total, "sweep");
}

/// The same sweep for the gate.
#[test]
fn gate_random_sweep() {
    let mut total = GateStats::default();
    for data in random_inputs(0x2545_f491_4f6c_dd1d, scaled(2_000)) {
        let outcome = std::panic::catch_unwind(|| replay_gate_bytes(&data));
        match outcome {
            Ok(Some(stats)) => add_gate(&mut total, &stats),
            Ok(None) => {}
            Err(panic) => {
                eprintln!("gate sweep input failed: {data:02x?}");
                std::panic::resume_unwind(panic);
            }
        }
    }
    assert_gate_reaches_everything(&total, "gate sweep");
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
        let outcome = std::panic::catch_unwind(|| replay(capacity, &ops));
        match outcome {
            Ok(stats) => add(&mut total, &stats),
            Err(panic) => {
                eprintln!("weighted case {case} failed: capacity {capacity}, {ops:?}");
                std::panic::resume_unwind(panic);
            }
        }
    }
    assert_reaches_everything(&total, "weighted sweep");
    assert!(
        cfg!(miri) || total.max_parked >= 32,
        "never parked a full batch: {total:?}"
    );
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
        let outcome = std::panic::catch_unwind(|| replay_gate(&case));
        match outcome {
            Ok(stats) => add_gate(&mut total, &stats),
            Err(panic) => {
                eprintln!("gate weighted case {case:?} failed");
                std::panic::resume_unwind(panic);
            }
        }
    }
    assert_gate_reaches_everything(&total, "gate weighted sweep");
    assert!(
        cfg!(miri) || total.admits_at_deadline > 0 && total.cancels_after_grant > 0,
        "{total:?}"
    );
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

fn add_gate(total: &mut GateStats, s: &GateStats) {
    total.ops += s.ops;
    total.immediate_admits += s.immediate_admits;
    total.parked_admits += s.parked_admits;
    total.admits_at_deadline += s.admits_at_deadline;
    total.sheds += s.sheds;
    total.sheds_at_once += s.sheds_at_once;
    total.try_sheds += s.try_sheds;
    total.try_admits += s.try_admits;
    total.cancels += s.cancels;
    total.cancels_after_grant += s.cancels_after_grant;
    total.closed += s.closed;
    total.oversize += s.oversize;
    total.deadline_wakes += s.deadline_wakes;
    total.dropped_parked_or_granted += s.dropped_parked_or_granted;
}

fn assert_gate_reaches_everything(t: &GateStats, what: &str) {
    if cfg!(miri) {
        return;
    }
    let reached = [
        ("immediate admits", t.immediate_admits),
        ("parked admits", t.parked_admits),
        ("sheds", t.sheds),
        ("sheds at once", t.sheds_at_once),
        ("try sheds", t.try_sheds),
        ("try admits", t.try_admits),
        ("cancels", t.cancels),
        ("closed", t.closed),
        ("oversize", t.oversize),
        ("deadline wakes", t.deadline_wakes),
        ("parked or granted drops", t.dropped_parked_or_granted),
    ];
    for (name, n) in reached {
        assert!(n > 0, "the {what} never reached {name}: {t:?}");
    }
    eprintln!("{what}: {t:?}");
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
