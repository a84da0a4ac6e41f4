// A pool of objects made elsewhere (deadpool's unmanaged pool, in miniature), over a
// semaphore used as a counter: one permit per idle object. A checkout acquires a
// permit and forgets it; a return pushes the object back and adds the permit again.
// The pool starts empty (`Semaphore::new(0)`) and fills as objects are added; a
// checkout on an empty pool waits, in arrival order, until one is added or returned.
//
// This file names no semaphore crate: the `use` line of the module that includes it
// picks `tokio::sync::Semaphore` or `admit::compat::Semaphore`.

use std::ops::{Deref, DerefMut};
use std::sync::Mutex;

/// A pool of `T`s.
#[derive(Debug)]
pub struct Pool<T> {
    /// One permit per object in `idle`.
    permits: Semaphore,
    idle: Mutex<Vec<T>>,
}

/// The pool was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Closed;

impl<T> Pool<T> {
    /// An empty pool: a checkout waits until an object is added.
    pub fn new() -> Self {
        Pool {
            permits: Semaphore::new(0),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Adds an object to the pool, for the checkout that has waited longest.
    pub fn add(&self, object: T) {
        // The object first, then its permit: a permit always finds an object.
        self.idle.lock().unwrap().push(object);
        self.permits.add_permits(1);
    }

    /// Checks an object out, waiting for one if none is idle.
    ///
    /// # Errors
    ///
    /// [`Closed`] if the pool is or becomes closed first.
    pub async fn get(&self) -> Result<Object<'_, T>, Closed> {
        let permit = self.permits.acquire().await.map_err(|_| Closed)?;
        permit.forget();
        Ok(self.take_idle())
    }

    /// Checks an object out if one is idle and no checkout waits ahead.
    pub fn try_get(&self) -> Option<Object<'_, T>> {
        self.permits.try_acquire().ok()?.forget();
        Some(self.take_idle())
    }

    fn take_idle(&self) -> Object<'_, T> {
        let object = self.idle.lock().unwrap().pop();
        Object {
            pool: self,
            object: Some(object.expect("a permit stands for an idle object")),
        }
    }

    /// Objects idle in the pool.
    pub fn idle(&self) -> usize {
        self.permits.available_permits()
    }

    /// Fails every waiting and later checkout. Objects checked out still come back.
    pub fn close(&self) {
        self.permits.close();
    }
}

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Pool::new()
    }
}

/// A checked-out object; dropping it returns it to the pool.
#[derive(Debug)]
pub struct Object<'a, T> {
    pool: &'a Pool<T>,
    /// `Some` until dropped or taken.
    object: Option<T>,
}

const HELD: &str = "an object until dropped or taken";

impl<T> Object<'_, T> {
    /// Takes the object out of the pool for good.
    pub fn take(mut this: Self) -> T {
        this.object.take().expect(HELD)
    }
}

impl<T> Deref for Object<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.object.as_ref().expect(HELD)
    }
}

impl<T> DerefMut for Object<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.object.as_mut().expect(HELD)
    }
}

impl<T> Drop for Object<'_, T> {
    fn drop(&mut self) {
        if let Some(object) = self.object.take() {
            self.pool.add(object);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::task::{yield_now, JoinHandle};

    use super::{Closed, Object, Pool};

    /// A checkout in a task of its own, which keeps the object it gets.
    fn checkout(pool: &Arc<Pool<u32>>) -> JoinHandle<Result<u32, Closed>> {
        let pool = Arc::clone(pool);
        tokio::spawn(async move { pool.get().await.map(Object::take) })
    }

    /// Lets every task that can run, run until it waits: on the current-thread
    /// runtime the tasks woken before a yield all run before the yielder resumes.
    async fn settle() {
        yield_now().await;
    }

    #[tokio::test]
    async fn checkout_waits_until_an_object_is_added() {
        let pool = Arc::new(Pool::new());
        let waiter = checkout(&pool);
        settle().await;
        assert!(!waiter.is_finished());
        pool.add(7);
        assert_eq!(waiter.await.unwrap(), Ok(7));
        assert_eq!(pool.idle(), 0);
    }

    #[tokio::test]
    async fn checkouts_are_served_in_arrival_order() {
        let pool = Arc::new(Pool::new());
        let mut waiters = Vec::new();
        for _ in 0..3 {
            waiters.push(checkout(&pool));
            settle().await; // parked before the next one arrives
        }
        for (served, object) in [10, 20, 30].into_iter().enumerate() {
            pool.add(object);
            settle().await;
            let finished: Vec<bool> = waiters.iter().map(JoinHandle::is_finished).collect();
            let expected: Vec<bool> = (0..3).map(|i| i <= served).collect();
            assert_eq!(finished, expected);
        }
        for (waiter, object) in waiters.into_iter().zip([10, 20, 30]) {
            assert_eq!(waiter.await.unwrap(), Ok(object));
        }
    }

    #[tokio::test]
    async fn closing_fails_waiting_and_later_checkouts() {
        let pool = Arc::new(Pool::new());
        let waiter = checkout(&pool);
        settle().await;
        pool.close();
        assert_eq!(waiter.await.unwrap(), Err(Closed));
        pool.add(1); // a return after the close is kept, not handed out
        assert_eq!(pool.get().await.err(), Some(Closed));
        assert!(pool.try_get().is_none());
    }

    #[tokio::test]
    async fn a_cancelled_checkout_loses_nothing() {
        let pool = Arc::new(Pool::new());
        // Cancelled while it waits.
        let parked = checkout(&pool);
        settle().await;
        parked.abort();
        assert!(parked.await.unwrap_err().is_cancelled());
        // Cancelled after the object was granted to it, before it ran to see it.
        let granted = checkout(&pool);
        settle().await;
        pool.add(1);
        granted.abort();
        assert!(granted.await.unwrap_err().is_cancelled());
        assert_eq!(pool.idle(), 1);
        assert_eq!(pool.try_get().map(Object::take), Some(1));
    }

    #[tokio::test]
    async fn a_returned_object_is_checked_out_again() {
        let pool = Arc::new(Pool::new());
        pool.add(1);
        let mut object = pool.try_get().unwrap();
        assert_eq!(pool.idle(), 0);
        assert!(pool.try_get().is_none());
        *object += 1;
        let waiter = checkout(&pool);
        settle().await;
        assert!(!waiter.is_finished());
        drop(object);
        assert_eq!(waiter.await.unwrap(), Ok(2));
        assert_eq!(pool.idle(), 0);
    }
}
