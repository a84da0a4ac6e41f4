//! The progress rule: a request whose client stops sending its body, sends it too
//! slowly, or stops reading its response is cut, so a few stalled sockets cannot
//! hold the gate's units for good.
//!
//! # The rule
//!
//! Watched: every admitted request, and every request decided
//! [`Decision::watch`](crate::Decision::watch) (one that works on a lease, whose
//! units the lease holds). Bypassed requests are not.
//!
//! - **Idle**: a request body that delivers nothing for the idle limit while the
//!   handler waits for it is cut (nginx's `client_body_timeout`).
//! - **Rate**: a request body may keep the handler waiting for the grace plus one
//!   second per [`min_rate`](ProgressRule::min_rate) bytes it delivered (Apache
//!   mod_reqtimeout's `MinRate`): a byte a second never stays idle, and this is
//!   what cuts it. The rate applies on a calm server too.
//! - **Response**: a response whose client stops reading for the response idle
//!   limit (hyper has a frame in hand and cannot write it, past the time the
//!   frame's bytes take at the minimum rate) is cut.
//!
//! Only the client's time counts: the request body's clock runs while the handler
//! waits on it (from a pending read to the next frame), never while the handler
//! works between two reads; the response's runs while hyper holds a frame it cannot
//! write, never while the handler is producing the next one.
//!
//! # Scaled by pressure
//!
//! The idle limits and the grace are generous while the gate is calm and shrink
//! linearly toward a floor as its [`Pressure`] rises (Envoy's
//! `reduce_timeouts`): a trickler admitted on a quiet server keeps its generous
//! limits only while nobody else needs the units. Limits are read again at least
//! every [`RECHECK`], so a request in flight follows the pressure.
//!
//! # A cut
//!
//! The observer hears [`on_cut`](admit::Observer::on_cut) once. The handler's next
//! read of the body fails with [`BodyCut`]. If no response has started, the client
//! is answered `408 Request Timeout` with `Connection: close`, whatever the handler
//! answers, and the handler's future is dropped if it has not answered within
//! [`cut_bound`](ProgressRule::cut_bound); once a response has started, its body
//! fails so the stream ends. The units return once the handler's future (or its
//! response) is gone: value before units. A response cut aborts the connection
//! (with a [`HangUp`] that can, as `PeerWatch`'s), and its units
//! return at most `cut_bound` after the cut.

use std::error::Error;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use admit::{CutEvent, CutReason, Gate, Observer, Pressure, Source, Timer};

use crate::permit::Release;
use crate::HangUp;

/// How often a watched request's limits are read again while it waits, so that
/// one admitted while the gate was calm follows the pressure when it rises.
pub const RECHECK: Duration = Duration::from_secs(1);

/// The limits of the progress rule (see [the crate docs](crate#holders-that-stall)).
///
/// Each idle limit and the grace is a pair: the value while the gate is calm, and
/// the floor it shrinks to under full pressure.
///
/// | limit | calm | floor |
/// |---|---|---|
/// | request body idle | 30 s | 5 s |
/// | grace before the rate applies | 30 s | 10 s |
/// | minimum rate after the grace | 1 KiB/s | — |
/// | response idle | 30 s | 5 s |
/// | a cut handler's time to return | 1 s | — |
///
/// Under pressure a byte-a-second trickler is cut about 10 s into its body; an
/// upload at 1 KiB a second or faster is never cut by the rate.
///
/// # Examples
///
/// ```
/// use std::time::Duration;
/// use admit_tower::ProgressRule;
///
/// // A registry whose clients are on slow links: never cut below 512 bytes a second,
/// // and a minute of silence allowed while calm.
/// let rule = ProgressRule::new()
///     .min_rate(512)
///     .idle(Duration::from_secs(60), Duration::from_secs(10));
/// # let _ = rule;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgressRule {
    pub(crate) idle: (Duration, Duration),
    pub(crate) grace: (Duration, Duration),
    pub(crate) min_rate: u64,
    pub(crate) response_idle: (Duration, Duration),
    pub(crate) cut_bound: Duration,
}

impl ProgressRule {
    /// The defaults (see the table above).
    #[must_use]
    pub const fn new() -> Self {
        Self {
            idle: (Duration::from_secs(30), Duration::from_secs(5)),
            grace: (Duration::from_secs(30), Duration::from_secs(10)),
            min_rate: 1024,
            response_idle: (Duration::from_secs(30), Duration::from_secs(5)),
            cut_bound: Duration::from_secs(1),
        }
    }

    /// The longest a request body may deliver nothing while the handler waits
    /// for it: `calm` while the gate is calm, down to `floor` under pressure.
    ///
    /// # Panics
    ///
    /// If `floor` is zero or above `calm`.
    #[must_use]
    pub fn idle(mut self, calm: Duration, floor: Duration) -> Self {
        self.idle = pair("idle", calm, floor);
        self
    }

    /// How long a request body is waited for before the minimum rate applies:
    /// `calm` while the gate is calm, down to `floor` under pressure.
    ///
    /// # Panics
    ///
    /// If `floor` is zero or above `calm`.
    #[must_use]
    pub fn grace(mut self, calm: Duration, floor: Duration) -> Self {
        self.grace = pair("grace", calm, floor);
        self
    }

    /// The minimum rate, in bytes a second, a request body must keep up after the
    /// grace: each `bytes_per_second` bytes delivered buy one more second of
    /// waiting.
    ///
    /// # Panics
    ///
    /// If zero, or at 16 KiB a second or more: a slow but real upload sends that.
    #[must_use]
    pub fn min_rate(mut self, bytes_per_second: u64) -> Self {
        assert!(
            bytes_per_second > 0 && bytes_per_second < 16 * 1024,
            "ProgressRule::min_rate: {bytes_per_second} B/s is not in 1..16384"
        );
        self.min_rate = bytes_per_second;
        self
    }

    /// The longest a client may leave a response unread: `calm` while the gate
    /// is calm, down to `floor` under pressure.
    ///
    /// # Panics
    ///
    /// If `floor` is zero or above `calm`.
    #[must_use]
    pub fn response_idle(mut self, calm: Duration, floor: Duration) -> Self {
        self.response_idle = pair("response_idle", calm, floor);
        self
    }

    /// How long a handler whose request was cut has to return before its future
    /// is dropped (and its units returned).
    ///
    /// # Panics
    ///
    /// If zero.
    #[must_use]
    pub fn cut_bound(mut self, bound: Duration) -> Self {
        assert!(!bound.is_zero(), "ProgressRule::cut_bound: zero");
        self.cut_bound = bound;
        self
    }

    /// The limits in force at `pressure`: (idle, grace, response idle).
    pub(crate) fn at(&self, pressure: Pressure) -> Limits {
        Limits {
            idle: pressure.scale(self.idle.0, self.idle.1),
            grace: pressure.scale(self.grace.0, self.grace.1),
            response_idle: pressure.scale(self.response_idle.0, self.response_idle.1),
        }
    }

    /// How long a body that delivered `received` bytes may keep its handler
    /// waiting in all, at `grace`.
    pub(crate) fn allowance(&self, grace: Duration, received: u64) -> Duration {
        grace.saturating_add(Duration::from_secs_f64(
            received as f64 / self.min_rate as f64,
        ))
    }
}

impl Default for ProgressRule {
    fn default() -> Self {
        Self::new()
    }
}

fn pair(what: &str, calm: Duration, floor: Duration) -> (Duration, Duration) {
    assert!(
        !floor.is_zero() && floor <= calm,
        "ProgressRule::{what}: the floor {floor:?} must be above zero and at most the calm limit {calm:?}"
    );
    (calm, floor)
}

/// The limits of [`ProgressRule`] at one pressure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    pub(crate) idle: Duration,
    pub(crate) grace: Duration,
    pub(crate) response_idle: Duration,
}

/// The error a handler's read of a cut request body fails with: the client sent
/// nothing for the idle limit, or too little after the grace. Tell it apart from
/// the client's own hang-up (a hyper error) with [`BodyCut::find`].
///
/// # Examples
///
/// ```
/// use admit::CutReason;
/// use admit_tower::BodyCut;
///
/// async fn upload(body: axum::body::Body) -> Result<String, String> {
///     match axum::body::to_bytes(body, 8 << 20).await {
///         Ok(bytes) => Ok(format!("stored {} bytes\n", bytes.len())),
///         // The layer answers 408 whatever we say; roll the partial upload back.
///         Err(error) if BodyCut::find(&error).is_some() => Err("cut".into()),
///         Err(_) => Err("the client hung up".into()),
///     }
/// }
/// # let _ = upload;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BodyCut {
    reason: CutReason,
}

impl BodyCut {
    pub(crate) const fn new(reason: CutReason) -> Self {
        Self { reason }
    }

    /// Which rule cut the request.
    #[must_use]
    pub const fn reason(&self) -> CutReason {
        self.reason
    }

    /// The `BodyCut` in `error` or its chain of sources, if any (axum and hyper
    /// wrap a body's error in their own).
    #[must_use]
    pub fn find<'a>(error: &'a (dyn Error + 'static)) -> Option<&'a BodyCut> {
        let mut next = Some(error);
        while let Some(error) = next {
            if let Some(cut) = error.downcast_ref::<BodyCut>() {
                return Some(cut);
            }
            next = error.source();
        }
        None
    }
}

impl fmt::Display for BodyCut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason {
            CutReason::Idle => f.write_str("the request was cut: its body stalled"),
            CutReason::Rate => f.write_str("the request was cut: its body came too slowly"),
            CutReason::Response => f.write_str("the request was cut: its client stopped reading"),
            _ => write!(f, "the request was cut ({})", self.reason.label()),
        }
    }
}

impl Error for BodyCut {}

pub(crate) type BoxSleep = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What the rule needs of the gate, with its types erased: the clock, the
/// pressure, the observer's cut hook, and a spawn for the response's watch.
pub(crate) trait GateClock: Send + Sync + 'static {
    fn now(&self) -> Duration;
    fn sleep_until(&self, deadline: Duration) -> BoxSleep;
    fn pressure(&self) -> Pressure;
    fn on_cut(&self, event: &CutEvent);
    fn spawn(&self, task: Box<dyn Future<Output = ()> + Send + 'static>) -> bool;
}

impl<S: Source, T: Timer, O: Observer> GateClock for Gate<S, T, O> {
    fn now(&self) -> Duration {
        self.timer().now()
    }

    fn sleep_until(&self, deadline: Duration) -> BoxSleep {
        Box::pin(self.timer().sleep_until(deadline))
    }

    fn pressure(&self) -> Pressure {
        Gate::pressure(self)
    }

    fn on_cut(&self, event: &CutEvent) {
        self.observer().on_cut(event);
    }

    fn spawn(&self, task: Box<dyn Future<Output = ()> + Send + 'static>) -> bool {
        self.timer().spawn(task)
    }
}

/// No cut yet.
const UNCUT: u64 = u64::MAX;
/// A cut's word: the reason's index in [`CutReason::ALL`] above this many bits
/// of the time (µs of the gate's timer: 2⁵⁶ µs is 2 284 years).
const CUT_TIME_BITS: u32 = 56;
/// [`Watch::response_ready`] while the response waits on its own body, not on
/// its client.
const SERVER_BUSY: u64 = u64::MAX;

/// One watched request's shared state: the request body, the response future,
/// the response body and the response's watch all reach it.
///
/// A cut is decided once: `cut` goes from [`UNCUT`] to the reason and the time by
/// one compare-and-swap, and only its winner tells the observer.
pub(crate) struct Watch {
    pub(crate) gate: Arc<dyn GateClock>,
    pub(crate) rule: ProgressRule,
    label: &'static str,
    units: usize,
    /// [`UNCUT`], or the cut's reason and time (see [`CUT_TIME_BITS`]).
    cut: AtomicU64,
    /// When the client's clock on the response started (the last frame handed
    /// to hyper, plus its bytes at the minimum rate), in µs of the gate's timer,
    /// or [`SERVER_BUSY`] while the response waits on its own producer.
    response_ready: AtomicU64,
    /// Aborts the connection on a response cut, where the server gave a way.
    hang_up: Option<HangUp>,
    /// Set once the response body has ended or was dropped: its watch stops.
    response_over: AtomicBool,
}

impl Watch {
    pub(crate) fn new(
        gate: Arc<dyn GateClock>,
        rule: ProgressRule,
        label: &'static str,
        units: usize,
        hang_up: Option<HangUp>,
    ) -> Self {
        Self {
            gate,
            rule,
            label,
            units,
            cut: AtomicU64::new(UNCUT),
            response_ready: AtomicU64::new(SERVER_BUSY),
            hang_up,
            response_over: AtomicBool::new(false),
        }
    }

    /// The cut's reason and time, once cut.
    pub(crate) fn cut_state(&self) -> Option<(CutReason, Duration)> {
        // `Relaxed`: the word is the whole fact; nothing else is published by it.
        let word = self.cut.load(Ordering::Relaxed);
        if word == UNCUT {
            return None;
        }
        let reason = CutReason::ALL[(word >> CUT_TIME_BITS) as usize];
        let at = Duration::from_micros(word & ((1 << CUT_TIME_BITS) - 1));
        Some((reason, at))
    }

    /// The cut's reason, once cut.
    pub(crate) fn cut_reason(&self) -> Option<CutReason> {
        self.cut_state().map(|(reason, _)| reason)
    }

    /// Cuts the request for `reason` after `watched` of the client's time, unless
    /// it was cut already, and tells the observer if this call cut it.
    pub(crate) fn cut(&self, reason: CutReason, watched: Duration) {
        if self.decide_cut(reason) {
            // User code, which may panic: the cut stands either way.
            self.tell_cut(reason, watched);
        }
    }

    /// Cuts the request for `reason`, unless it was cut already; returns whether
    /// this call cut it (its caller alone tells the observer).
    fn decide_cut(&self, reason: CutReason) -> bool {
        let index = CutReason::ALL
            .iter()
            .position(|r| *r == reason)
            .expect("every reason is in CutReason::ALL") as u64;
        let at = micros(self.gate.now()).min((1 << CUT_TIME_BITS) - 1);
        let word = (index << CUT_TIME_BITS) | at;
        self.cut
            .compare_exchange(UNCUT, word, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// Tells the observer of the cut this request's `decide_cut` won.
    fn tell_cut(&self, reason: CutReason, watched: Duration) {
        self.gate
            .on_cut(&CutEvent::new(self.label, self.units, reason, watched));
    }

    /// The response body handed hyper a frame of `bytes` now. The client's clock
    /// starts once a reader at the minimum rate would have taken it, so a large
    /// frame to a slow but honest reader is not mistaken for a stall.
    pub(crate) fn response_handed(&self, bytes: u64) {
        let start = self
            .gate
            .now()
            .saturating_add(self.rule.allowance(Duration::ZERO, bytes));
        self.response_ready.store(micros(start), Ordering::Relaxed);
    }

    /// The response body ended or was dropped.
    pub(crate) fn response_over(&self) {
        self.response_over.store(true, Ordering::Relaxed);
    }

    /// The response body waits on its own producer: the client is not late.
    pub(crate) fn response_busy(&self) {
        self.response_ready.store(SERVER_BUSY, Ordering::Relaxed);
    }

    /// Aborts the connection, where the server gave a way.
    pub(crate) fn abort(&self) {
        if let Some(hang_up) = &self.hang_up {
            hang_up.abort();
        }
    }
}

/// The watch of a response whose client may stop reading, run in the background
/// from its first frame on: sleeps until the response idle limit after the last
/// frame hyper took (and its bytes at the minimum rate), and cuts if hyper took
/// none since; ends once the body has
/// ended or was dropped. After a cut it aborts the connection and, `cut_bound`
/// later, returns the units (if any are still in the slot) should hyper not have
/// dropped the body by then.
pub(crate) async fn watch_response(slot: Arc<dyn Release>) {
    loop {
        let Some(watch) = slot.watch() else { return };
        if watch.response_over.load(Ordering::Relaxed) || watch.cut_reason().is_some() {
            return;
        }
        let now = watch.gate.now();
        let ready = watch.response_ready.load(Ordering::Relaxed);
        let mut next = now + RECHECK;
        if ready != SERVER_BUSY {
            let since = Duration::from_micros(ready);
            let limit = watch.rule.at(watch.gate.pressure()).response_idle;
            let stalled = now.saturating_sub(since);
            if stalled >= limit {
                if watch.decide_cut(CutReason::Response) {
                    watch.abort();
                    // Returns the units after the bound, or at once if the
                    // observer panics or the task is dropped meanwhile.
                    let _release = ReleaseOnDrop(&*slot);
                    watch.tell_cut(CutReason::Response, stalled);
                    watch.gate.sleep_until(now + watch.rule.cut_bound).await;
                }
                return;
            }
            next = next.min(since + limit);
        }
        let sleep = watch.gate.sleep_until(next);
        sleep.await;
    }
}

/// Releases a slot's units when dropped.
struct ReleaseOnDrop<'a>(&'a dyn Release);

impl Drop for ReleaseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.release();
    }
}

impl fmt::Debug for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch")
            .field("source", &self.label)
            .field("units", &self.units)
            .field("cut", &self.cut_reason())
            .finish_non_exhaustive()
    }
}

/// `t` in whole microseconds (a timer's `now` stays below 2⁶⁴ µs: 584 000 years).
fn micros(t: Duration) -> u64 {
    u64::try_from(t.as_micros()).unwrap_or(u64::MAX - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn the_defaults_cut_a_trickler_within_fifteen_seconds_under_pressure() {
        let rule = ProgressRule::new();
        let pressed = rule.at(Pressure::from_level(1.0));
        // A byte a second: after t seconds of waiting it has t bytes; cut once
        // t >= allowance(t).
        let t = (1..60u64)
            .find(|&t| s(t) >= rule.allowance(pressed.grace, t))
            .unwrap();
        assert!(t <= 15, "cut at {t} s");
        // Calm: the grace is generous, the rate still applies.
        let calm = rule.at(Pressure::CALM);
        let t = (1..120u64)
            .find(|&t| s(t) >= rule.allowance(calm.grace, t))
            .unwrap();
        assert!((30..=40).contains(&t), "cut at {t} s");
    }

    #[test]
    fn sixteen_kib_a_second_is_never_cut_by_the_rate() {
        let rule = ProgressRule::new().min_rate(16 * 1024 - 1);
        let grace = rule.at(Pressure::from_level(1.0)).grace;
        for t in 1..3600u64 {
            assert!(s(t) < rule.allowance(grace, t * 16 * 1024));
        }
    }

    #[test]
    #[should_panic(expected = "must be above zero and at most the calm limit")]
    fn a_floor_above_calm_is_refused() {
        let _ = ProgressRule::new().idle(s(5), s(10));
    }

    #[test]
    #[should_panic(expected = "is not in 1..16384")]
    fn a_min_rate_of_sixteen_kib_is_refused() {
        let _ = ProgressRule::new().min_rate(16 * 1024);
    }

    #[test]
    fn body_cut_is_found_in_a_chain() {
        #[derive(Debug)]
        struct Wrapper(BodyCut);
        impl fmt::Display for Wrapper {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("wrapped")
            }
        }
        impl Error for Wrapper {
            fn source(&self) -> Option<&(dyn Error + 'static)> {
                Some(&self.0)
            }
        }
        let wrapped = Wrapper(BodyCut::new(CutReason::Rate));
        assert_eq!(
            BodyCut::find(&wrapped).map(BodyCut::reason),
            Some(CutReason::Rate)
        );
        let other = std::io::Error::other("hang-up");
        assert!(BodyCut::find(&other).is_none());
    }
}
