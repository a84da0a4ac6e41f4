//! A multi-threaded hammer with random weights, cancellations and `try_acquire`s:
//! units in use, counted after each grant and before each release, never exceed
//! the capacity, and everything is back at the end. Run with as many threads as
//! cores, and oversubscribed (32 threads: on a 2-core machine, sixteen runnable
//! threads per core, so threads are descheduled mid-operation all the time).

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll, Waker};

use admit::Semaphore;

const CAPACITY: usize = 5;

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn hold(in_use: &AtomicUsize, units: usize) {
    let now = in_use.fetch_add(units, Ordering::SeqCst) + units;
    assert!(now <= CAPACITY, "{now} units in use, capacity {CAPACITY}");
    std::hint::spin_loop();
    in_use.fetch_sub(units, Ordering::SeqCst);
}

#[test]
fn units_in_use_never_exceed_capacity() {
    hammer(4, if cfg!(miri) { 50 } else { 20_000 });
}

#[test]
fn units_in_use_never_exceed_capacity_oversubscribed() {
    hammer(32, if cfg!(miri) { 5 } else { 2_500 });
}

fn hammer(threads: u64, ops: usize) {
    let sem = Semaphore::new(CAPACITY);
    let in_use = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for seed in 1..=threads {
            let (sem, in_use) = (&sem, &in_use);
            s.spawn(move || {
                let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                for _ in 0..ops {
                    let units = 1 + rng.below(CAPACITY as u64) as usize;
                    match rng.below(4) {
                        0 => {
                            if let Ok(permit) = sem.try_acquire(units) {
                                hold(in_use, units);
                                drop(permit);
                            }
                        }
                        1 => {
                            // Poll once, then give up: a cancellation at a random point.
                            let mut fut = std::pin::pin!(sem.acquire(units));
                            if let Poll::Ready(p) =
                                fut.as_mut().poll(&mut Context::from_waker(Waker::noop()))
                            {
                                hold(in_use, units);
                                drop(p);
                            }
                        }
                        _ => {
                            let permit =
                                futures_lite::future::block_on(sem.acquire(units)).unwrap();
                            hold(in_use, units);
                            drop(permit);
                        }
                    }
                }
            });
        }
    });
    assert_eq!(
        (
            sem.available(),
            sem.waiters(),
            in_use.load(Ordering::SeqCst)
        ),
        (CAPACITY, 0, 0)
    );
}
