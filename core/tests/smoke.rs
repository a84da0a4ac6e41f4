//! Smoke test of the public API.
use admit::Semaphore;
use futures_lite::future::{block_on, poll_once};
#[test]
fn smoke() {
    let s = Semaphore::new(2);
    let p = s.try_acquire(2).unwrap();
    let mut a = Box::pin(s.acquire(1));
    let mut b = Box::pin(s.acquire(1));
    assert!(block_on(poll_once(a.as_mut())).is_none());
    assert!(block_on(poll_once(b.as_mut())).is_none());
    assert_eq!(s.waiters(), 2);
    drop(p);
    assert_eq!(s.waiters(), 0);
    let pa = block_on(a).unwrap();
    let pb = block_on(b).unwrap();
    assert_eq!(s.available(), 0);
    drop((pa, pb));
    assert_eq!(s.available(), 2);
}
