//! The summary a person reads at a glance, and the checks that decide the exit code.

use std::fmt;
use std::sync::atomic::Ordering;
use std::time::Duration;

use admit::{CutReason, LeaseEnd, Priority, ShedReason, Source};

use crate::client::StallEnd;
use crate::config::{bytes, Config, SLOW_RATE};
use crate::load::{Observed, Outcome, Plan, SlowResult, StallKind, StallerResult};
use crate::scrape::Scrape;
use crate::server::{reason_index, Route, ServerStats, CUT_REASONS, REASONS, ROUTES};
use crate::sessions::SessionEnds;
use crate::timeline::Timeline;
use crate::{by_reason, secs, Drained};

/// The server-side tallies at the end of the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerCounts {
    /// Permits granted.
    pub admitted: usize,
    /// `GateError::Busy` answered, per route in [`Route::ALL`](admit::Source::ALL) order.
    pub busy: [usize; ROUTES],
    /// `GateError::Busy` answered, per reason in [`ShedReason::ALL`] order.
    pub busy_by_reason: [usize; REASONS],
    /// `GateError::Cancelled`: the client hung up while parked.
    pub cancelled: usize,
    /// `GateError::Closed`.
    pub closed: usize,
    /// `GateError::ExceedsCapacity`.
    pub exceeds_capacity: usize,
    /// Admitted, body incomplete (not a cut).
    pub body_errors: usize,
    /// Requests the progress rule cut, per reason in [`CutReason::ALL`] order.
    pub cuts: [usize; CUT_REASONS],
}

impl From<&ServerStats> for ServerCounts {
    fn from(s: &ServerStats) -> Self {
        let n = |c: &std::sync::atomic::AtomicUsize| c.load(Ordering::Relaxed);
        Self {
            admitted: n(&s.admitted),
            busy: [
                s.busy(Route::Upload),
                s.busy(Route::Mirror),
                s.busy(Route::Session),
            ],
            busy_by_reason: ShedReason::ALL.map(|reason| s.busy_for(reason)),
            cancelled: n(&s.cancelled),
            closed: n(&s.closed),
            exceeds_capacity: n(&s.exceeds_capacity),
            body_errors: n(&s.body_errors),
            cuts: s.cuts.each_ref().map(n),
        }
    }
}

/// One request made after the gate was closed.
#[derive(Debug, Clone, PartialEq)]
pub struct ClosedProbe {
    /// Its status (503 expected).
    pub status: u16,
    /// Its `Retry-After`, if any (none expected).
    pub retry_after: Option<String>,
    /// The shed counters' sum scraped after it (unchanged expected).
    pub shed_total_after: Option<f64>,
}

/// The upload sessions' clients, as they saw their sessions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionClients {
    /// Clients that ran an upload session.
    pub clients: usize,
    /// Their `POST`s answered `202` (a session opened).
    pub opened: usize,
    /// Sessions finished: `PUT` answered `201`.
    pub finished: usize,
    /// Sessions cancelled: `DELETE` answered `204`.
    pub cancelled: usize,
    /// Sessions whose client went quiet after a chunk.
    pub went_quiet: usize,
    /// Of those, the late requests answered `404 BLOB_UPLOAD_UNKNOWN`, saying the
    /// session expired.
    pub told_expired: usize,
    /// The other answers to late requests (status, body), none expected.
    pub late_answers_otherwise: Vec<(u16, String)>,
    /// Sessions opened by stallers (whose `PATCH` then stalled).
    pub stalled: usize,
    /// Of those, cut and back past the idle limit, told `404 BLOB_UPLOAD_UNKNOWN`
    /// expired.
    pub stalled_told_expired: usize,
}

/// One check and whether it held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    /// What is checked.
    pub name: &'static str,
    /// Whether it held.
    pub ok: bool,
    /// The values behind it.
    pub detail: String,
}

/// Everything the run saw, and its checks.
#[derive(Debug, Clone)]
pub struct Report {
    /// The gate's capacity in units.
    pub capacity: usize,
    /// The gate's wait budget.
    pub wait_budget: Duration,
    /// The gate's overload target; `None`: the fixed wait budget alone.
    pub overload_target: Option<Duration>,
    /// Clients started.
    pub clients: usize,
    /// Clients answered 200, and upload sessions' clients whose session went as
    /// they planned it.
    pub admitted: usize,
    /// Clients answered 503 with `Retry-After`, per route in `Route::ALL` order.
    pub shed: [usize; ROUTES],
    /// Of the clients, per class (`[critical_plus, critical]`: resumed uploads,
    /// and the rest): how many there were, and how many were shed.
    pub by_class: [(usize, usize); 2],
    /// Clients that hung up on purpose while parked.
    pub hung_up: usize,
    /// Clients answered 503 without `Retry-After`.
    pub unavailable: usize,
    /// Unexpected outcomes (a status other than 200/503, an I/O error, a timeout).
    pub failures: Vec<String>,
    /// Every `Retry-After` value received, as sent.
    pub retry_after: Vec<String>,
    /// The server's own tallies.
    pub server: ServerCounts,
    /// Peak units in use, sampled from the gate every 2 ms.
    pub peak_in_use: usize,
    /// Peak `units_in_use` gauge, scraped from `/metrics` every 250 ms.
    pub peak_in_use_scraped: f64,
    /// Scrapes taken during the load.
    pub scrapes: usize,
    /// The gate's units in use after the load.
    pub in_use_at_end: usize,
    /// Waits of admitted requests, sorted.
    pub waits: Vec<Duration>,
    /// Waits of shed requests before their `503` (the time to shed), sorted.
    pub shed_waits: Vec<Duration>,
    /// The run over time, with the spans the gate was overloaded.
    pub timeline: Option<Timeline>,
    /// `/metrics` before any load.
    pub before: Scrape,
    /// `/metrics` after the load.
    pub after: Scrape,
    /// The request made after the gate was closed.
    pub closed_probe: ClosedProbe,
    /// The drain at shutdown.
    pub drained: Drained,
    /// The upload sessions' idle limit.
    pub idle_limit: Duration,
    /// The upload sessions as their clients saw them.
    pub session_clients: SessionClients,
    /// The upload sessions as the server's observer heard them end.
    pub sessions: SessionEnds,
    /// The stallers, as each saw its stalled request end.
    pub stallers: Vec<StallerResult>,
    /// The slow clients' answers.
    pub slow: Vec<SlowResult>,
    /// Wall time of the whole run.
    pub elapsed: Duration,
    /// The time the run was planned to take, plus slack: beyond it, a check fails.
    pub time_limit: Duration,
    /// The checks, in order.
    pub checks: Vec<Check>,
}

impl Report {
    /// Collects the run's observations and runs the checks.
    #[allow(clippy::too_many_arguments)]
    #[must_use]
    pub fn new(
        config: &Config,
        capacity: usize,
        observed: &Observed,
        server: ServerCounts,
        mut waits: Vec<Duration>,
        mut shed_waits: Vec<Duration>,
        timeline: Option<Timeline>,
        in_use_at_end: usize,
        before: Scrape,
        after: Scrape,
        closed_probe: ClosedProbe,
        drained: Drained,
        sessions: SessionEnds,
        elapsed: Duration,
    ) -> Self {
        waits.sort_unstable();
        shed_waits.sort_unstable();
        let mut report = Self {
            capacity,
            wait_budget: config.wait_budget,
            overload_target: config.overload_target(),
            clients: observed.results.len(),
            admitted: 0,
            shed: [0; ROUTES],
            by_class: [(0, 0); 2],
            hung_up: 0,
            unavailable: 0,
            failures: Vec::new(),
            retry_after: Vec::new(),
            server,
            peak_in_use: observed.peak_in_use,
            peak_in_use_scraped: observed.peak_in_use_scraped,
            scrapes: observed.scrapes,
            in_use_at_end,
            waits,
            shed_waits,
            timeline,
            before,
            after,
            closed_probe,
            drained,
            idle_limit: config.idle_limit,
            session_clients: SessionClients::default(),
            sessions,
            stallers: observed.stallers.clone(),
            slow: observed.slow.clone(),
            elapsed,
            time_limit: config.planned_duration() + Duration::from_secs(15),
            checks: Vec::new(),
        };
        for result in &observed.results {
            let class = &mut report.by_class[usize::from(!result.resumed)];
            class.0 += 1;
            class.1 += usize::from(matches!(result.outcome, Outcome::Shed(_)));
            match &result.outcome {
                Outcome::Admitted => report.admitted += 1,
                Outcome::Shed(retry_after) => {
                    report.shed[route_index(result.route)] += 1;
                    report.retry_after.push(retry_after.clone());
                }
                Outcome::HungUp => report.hung_up += 1,
                Outcome::Unavailable => report.unavailable += 1,
                Outcome::Failed(why) => report.failures.push(why.clone()),
            }
            let sessions = &mut report.session_clients;
            sessions.clients += usize::from(result.route == Route::Session);
            let Some(run) = &result.session else {
                continue;
            };
            sessions.opened += 1;
            let as_planned = result.outcome == Outcome::Admitted;
            match run.plan {
                Plan::Finish => sessions.finished += usize::from(as_planned),
                Plan::Cancel => sessions.cancelled += usize::from(as_planned),
                Plan::GoQuiet => {
                    sessions.went_quiet += 1;
                    match &run.late_answer {
                        Some(answer) if told_expired(answer) => sessions.told_expired += 1,
                        Some(other) => sessions.late_answers_otherwise.push(other.clone()),
                        None => {}
                    }
                }
            }
        }
        for staller in &observed.stallers {
            let sessions = &mut report.session_clients;
            if staller.opened_session {
                sessions.stalled += 1;
                if staller.late_answer.as_ref().is_some_and(told_expired) {
                    sessions.stalled_told_expired += 1;
                }
            }
        }
        report.checks = report.run_checks();
        report
    }

    /// The checks of the stallers and the slow clients: the stallers cut, and
    /// nobody else (always checked: without stallers, nobody is cut); each cut
    /// counted once, per reason and per source; a stalled `PATCH`'s session
    /// expired once it was cut; the slow clients served.
    fn stall_checks(&self, check: &mut impl FnMut(&'static str, bool, String)) {
        let (tricklers, tricklers_cut) = self.stallers_cut(StallKind::Trickle);
        let (patches, patches_cut) = self.stallers_cut(StallKind::Patch);
        if !self.stallers.is_empty() {
            let not_cut: Vec<String> = self
                .stallers
                .iter()
                .filter(|s| !s.cut())
                .map(|s| match (&s.failed, s.ended) {
                    (Some(why), _) => why.clone(),
                    (None, Some((at, StallEnd::Answered(status)))) => {
                        format!("{:?} answered {status} after {at:?}", s.kind)
                    }
                    (None, _) => format!("{:?} still open when it gave up", s.kind),
                })
                .collect();
            check(
                "every staller cut (408 or its connection closed) before the run's end",
                not_cut.is_empty(),
                format!(
                    "{} of {} cut; not cut: {:?}",
                    tricklers_cut + patches_cut,
                    self.stallers.len(),
                    not_cut.iter().take(3).collect::<Vec<_>>()
                ),
            );
        }
        let heard: usize = self.server.cuts.iter().sum();
        let per_reason: Vec<_> = CutReason::ALL
            .iter()
            .map(|&reason| {
                (
                    reason,
                    self.after.sum("cuts_total", &[("reason", reason.label())]),
                    self.cuts_for(reason),
                )
            })
            .collect();
        let source = |route: Route, reason: Option<CutReason>| {
            let mut labels = vec![("source", route.label())];
            if let Some(reason) = reason {
                labels.push(("reason", reason.label()));
            }
            self.after.sum("cuts_total", &labels)
        };
        let cut = |n: usize| Some(n as f64);
        check(
            "cut: the stallers and nobody else, each once (cuts heard = cuts_total, per reason \
             and source; a stalled PATCH for idle)",
            heard == tricklers_cut + patches_cut
                && per_reason
                    .iter()
                    .all(|(_, metric, heard)| *metric == cut(*heard))
                && self.cuts_for(CutReason::Response) == 0
                && source(Route::Upload, None) == cut(tricklers_cut)
                && source(Route::Mirror, None) == cut(0)
                && source(Route::Session, None) == cut(patches_cut)
                && source(Route::Session, Some(CutReason::Idle)) == cut(patches_cut),
            format!(
                "heard {heard} ({}), stallers cut: trickle {tricklers_cut} of {tricklers}, PATCH \
                 {patches_cut} of {patches}; cuts_total: {}; by source: upload {:?}, mirror \
                 {:?}, session {:?} (idle {:?})",
                by_cut_reason(|r| self.cuts_for(r).to_string()),
                per_reason
                    .iter()
                    .map(|(reason, metric, _)| format!("{} {metric:?}", reason.label()))
                    .collect::<Vec<_>>()
                    .join(", "),
                source(Route::Upload, None),
                source(Route::Mirror, None),
                source(Route::Session, None),
                source(Route::Session, Some(CutReason::Idle)),
            ),
        );
        let c = &self.session_clients;
        if c.stalled > 0 {
            check(
                "stalled PATCHes' sessions back to idle once cut, then expired, their units back",
                c.stalled_told_expired == c.stalled && self.sessions.units_after_idle == 0,
                format!(
                    "{} of {} told 404 expired when back past the idle limit; {} session units \
                     held after the idle limit",
                    c.stalled_told_expired, c.stalled, self.sessions.units_after_idle
                ),
            );
        }
        if !self.slow.is_empty() {
            let served = self.slow.iter().filter(|s| s.answer == Ok(200)).count();
            check(
                "slow clients at 16 KiB/s served (200), never cut",
                served == self.slow.len(),
                format!(
                    "{served} of {} served; answers {:?}",
                    self.slow.len(),
                    self.slow.iter().map(|s| &s.answer).collect::<Vec<_>>()
                ),
            );
        }
    }

    /// The stallers of `kind`, and how many of them were cut.
    #[must_use]
    pub fn stallers_cut(&self, kind: StallKind) -> (usize, usize) {
        let of: Vec<_> = self.stallers.iter().filter(|s| s.kind == kind).collect();
        (of.len(), of.iter().filter(|s| s.cut()).count())
    }

    /// The server's cuts for `reason`.
    #[must_use]
    pub fn cuts_for(&self, reason: CutReason) -> usize {
        CutReason::ALL
            .iter()
            .position(|&r| r == reason)
            .map_or(0, |i| self.server.cuts[i])
    }

    /// Clients shed, over every route.
    #[must_use]
    pub fn shed_total(&self) -> usize {
        self.shed.iter().sum()
    }

    /// The server's sheds for `reason`.
    #[must_use]
    pub fn shed_for(&self, reason: ShedReason) -> usize {
        reason_index(reason).map_or(0, |i| self.server.busy_by_reason[i])
    }

    /// Whether every check held.
    #[must_use]
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.ok)
    }

    /// The `PASS: …` or `FAIL: …` line.
    #[must_use]
    pub fn verdict(&self) -> String {
        let failed: Vec<_> = self.checks.iter().filter(|c| !c.ok).collect();
        if failed.is_empty() {
            format!(
                "PASS: all {} checks held: never over capacity, every shed a 503 with Retry-After, \
                 shed_total = 503s seen ({}), hang-ups counted nowhere, every upload session \
                 ended once ({}), its buffer freed before its unit, {}drained at shutdown, \
                 units back to 0",
                self.checks.len(),
                self.shed_total(),
                self.sessions.ended_total(),
                if self.stallers.is_empty() {
                    String::new()
                } else {
                    format!(
                        "every staller cut ({}) and nobody else, ",
                        self.stallers.len()
                    )
                },
            )
        } else {
            let reasons: Vec<_> = failed
                .iter()
                .map(|c| format!("{} ({})", c.name, c.detail))
                .collect();
            format!("FAIL: {}", reasons.join("; "))
        }
    }

    /// The admitted requests' wait at quantile `q` (nearest rank).
    #[must_use]
    pub fn wait_quantile(&self, q: f64) -> Option<Duration> {
        quantile(&self.waits, q)
    }

    /// The shed requests' time to shed (how long each waited before its `503`) at
    /// quantile `q` (nearest rank).
    #[must_use]
    pub fn shed_wait_quantile(&self, q: f64) -> Option<Duration> {
        quantile(&self.shed_waits, q)
    }

    /// What the run's gate was: `fixed wait budget`, or `overload target 200ms`.
    #[must_use]
    pub fn title(&self) -> String {
        match self.overload_target {
            None => "fixed wait budget".into(),
            Some(target) => format!("overload target {}", secs(target)),
        }
    }

    /// The spans the gate was overloaded, in seconds since the start.
    #[must_use]
    pub fn overloaded(&self) -> &[(f64, f64)] {
        self.timeline.as_ref().map_or(&[], |t| &t.overloaded)
    }

    fn run_checks(&self) -> Vec<Check> {
        let cap = self.capacity as f64;
        let mut checks = Vec::new();
        let mut check = |name: &'static str, ok: bool, detail: String| {
            checks.push(Check { name, ok, detail });
        };

        let zeros: Vec<_> = Route::ALL
            .iter()
            .map(|&r| (r.label(), self.before.shed_total(r)))
            .collect();
        check(
            "shed counters registered at 0 before the first shed",
            zeros.iter().all(|(_, v)| *v == Some(0.0)),
            format!("{zeros:?}"),
        );
        check(
            "capacity gauge is the gate's capacity",
            self.before.metric("capacity_units") == Some(cap),
            format!(
                "capacity_units {:?}, gate {}",
                self.before.metric("capacity_units"),
                self.capacity
            ),
        );
        check(
            "never over capacity",
            self.peak_in_use <= self.capacity && self.peak_in_use_scraped <= cap,
            format!(
                "peak {} sampled, {} scraped, capacity {}",
                self.peak_in_use, self.peak_in_use_scraped, self.capacity
            ),
        );
        let bad_retry_after: Vec<_> = self
            .retry_after
            .iter()
            .filter(|v| v.parse::<u64>().map_or(true, |s| s < 1))
            .collect();
        check(
            "every shed answered 503 with Retry-After >= 1",
            self.unavailable == 0 && bad_retry_after.is_empty(),
            format!(
                "{} without Retry-After, bad values {bad_retry_after:?}",
                self.unavailable
            ),
        );
        let per_route: Vec<_> = Route::ALL
            .iter()
            .map(|&r| {
                let i = route_index(r);
                (
                    r.label(),
                    self.after.shed_total(r),
                    self.shed[i],
                    self.server.busy[i],
                )
            })
            .collect();
        let per_reason: Vec<_> = ShedReason::ALL
            .iter()
            .map(|&reason| {
                (
                    reason.label(),
                    self.after.shed_total_by_reason(reason),
                    self.shed_for(reason),
                )
            })
            .collect();
        let per_class = [Priority::CriticalPlus, Priority::Critical].map(|class| {
            let i = usize::from(class != Priority::CriticalPlus);
            (
                class.label(),
                self.after.sum("shed_total", &[("priority", class.label())]),
                self.by_class[i].1,
            )
        });
        check(
            "shed_total = 503 Busy responses seen (hang-ups counted nowhere)",
            per_route
                .iter()
                .all(|(_, metric, seen, busy)| *metric == Some(*seen as f64) && seen == busy)
                && per_reason
                    .iter()
                    .all(|(_, metric, busy)| *metric == Some(*busy as f64))
                && per_class
                    .iter()
                    .all(|(_, metric, seen)| *metric == Some(*seen as f64)),
            per_route
                .iter()
                .map(|(label, metric, seen, busy)| {
                    format!(
                        "{label}: metric {metric:?}, clients saw {seen}, server answered {busy}"
                    )
                })
                .chain(per_reason.iter().map(|(label, metric, busy)| {
                    format!("reason {label}: metric {metric:?}, server answered {busy}")
                }))
                .chain(per_class.iter().map(|(label, metric, seen)| {
                    format!("class {label}: metric {metric:?}, clients saw {seen}")
                }))
                .collect::<Vec<_>>()
                .join("; "),
        );
        if self.overload_target.is_none() {
            let overload_rule =
                self.shed_for(ShedReason::Overload) + self.shed_for(ShedReason::Hopeless);
            check(
                "without an overload target, no overload or hopeless sheds",
                overload_rule == 0 && self.overloaded().is_empty(),
                format!(
                    "{overload_rule} such sheds, {} overload episodes",
                    self.overloaded().len()
                ),
            );
        }
        check(
            "no unexpected outcomes",
            self.failures.is_empty()
                && self.clients == self.admitted + self.shed_total() + self.hung_up,
            format!("{:?}", self.failures.iter().take(3).collect::<Vec<_>>()),
        );
        check(
            "units in use back to 0",
            self.in_use_at_end == 0 && self.after.metric("units_in_use") == Some(0.0),
            format!(
                "gate {}, gauge {:?}",
                self.in_use_at_end,
                self.after.metric("units_in_use")
            ),
        );
        let admitted = self.server.admitted as f64;
        check(
            "every admission timed once (wait) and every release once (hold)",
            self.after.sum("wait_seconds_count", &[]) == Some(admitted)
                && self.after.metric("hold_seconds_count") == Some(admitted),
            format!(
                "wait_seconds_count {:?}, hold_seconds_count {:?}, admitted {}",
                self.after.sum("wait_seconds_count", &[]),
                self.after.metric("hold_seconds_count"),
                self.server.admitted
            ),
        );
        let p = &self.closed_probe;
        check(
            "closed gate: 503 without Retry-After, not a shed",
            p.status == 503
                && p.retry_after.is_none()
                && p.shed_total_after == self.after.shed_total_sum(),
            format!(
                "status {}, Retry-After {:?}, shed_total {:?} -> {:?}",
                p.status,
                p.retry_after,
                self.after.shed_total_sum(),
                p.shed_total_after
            ),
        );
        let s = &self.sessions;
        let c = &self.session_clients;
        check(
            "every upload session ended exactly once",
            s.opened == c.opened + c.stalled
                && s.opened == s.ended_total()
                && s.ended_once == s.opened
                && s.ended_more_than_once + s.not_ended + s.unidentified == 0,
            format!(
                "opened {} (clients saw {}, stallers {}), ended {} ({}); ended once {}, \
                 more than once {}, not ended {}, ends of no session {}",
                s.opened,
                c.opened,
                c.stalled,
                s.ended_total(),
                by_how(|how| s.ended(how).to_string()),
                s.ended_once,
                s.ended_more_than_once,
                s.not_ended,
                s.unidentified,
            ),
        );
        check(
            "upload sessions ended as their clients ended them: expired = went quiet or stalled",
            s.ended(LeaseEnd::Finished) == c.finished
                && s.ended(LeaseEnd::Cancelled) == c.cancelled
                && s.ended(LeaseEnd::Expired) + s.ended(LeaseEnd::Drained)
                    == c.went_quiet + c.stalled
                && s.ended(LeaseEnd::Drained) == 0
                && s.ended(LeaseEnd::Aged) == 0
                && c.told_expired == c.went_quiet,
            format!(
                "finished {} (PUT 201 {}), cancelled {} (DELETE 204 {}), expired {} + drained {} \
                 (went quiet {}, of them told 404 expired when back {}; stalled {}; other \
                 answers {:?}), aged {}",
                s.ended(LeaseEnd::Finished),
                c.finished,
                s.ended(LeaseEnd::Cancelled),
                c.cancelled,
                s.ended(LeaseEnd::Expired),
                s.ended(LeaseEnd::Drained),
                c.went_quiet,
                c.told_expired,
                c.stalled,
                c.late_answers_otherwise.iter().take(3).collect::<Vec<_>>(),
                s.ended(LeaseEnd::Aged),
            ),
        );
        check(
            "upload sessions' units back to 0 after the idle limit (before the drain)",
            s.live_after_idle == 0 && s.units_after_idle == 0,
            format!(
                "{} sessions live, {} units held",
                s.live_after_idle, s.units_after_idle
            ),
        );
        check(
            "every upload session's buffer freed before its unit returned",
            s.freed_first == s.ended_total() && s.returned_unfreed == 0,
            format!(
                "{} units returned after their buffer was freed, {} before, of {} sessions ended",
                s.freed_first,
                s.returned_unfreed,
                s.ended_total()
            ),
        );
        let per_how: Vec<_> = LeaseEnd::ALL
            .iter()
            .map(|&how| {
                (
                    how.label(),
                    self.after
                        .sum("leases_ended_total", &[("how", how.label())]),
                    self.after
                        .sum("lease_hold_seconds_count", &[("how", how.label())]),
                    s.ended(how),
                )
            })
            .collect();
        check(
            "leases_ended_total and lease_hold_seconds_count = lease ends heard, per how",
            per_how.iter().all(|(_, ended, held, heard)| {
                *ended == Some(*heard as f64) && *held == Some(*heard as f64)
            }),
            per_how
                .iter()
                .map(|(how, ended, held, heard)| {
                    format!("{how}: leases_ended_total {ended:?}, lease_hold_seconds_count {held:?}, heard {heard}")
                })
                .collect::<Vec<_>>()
                .join("; "),
        );
        self.stall_checks(&mut check);
        check(
            "drained at shutdown: every unit back within the grace period",
            self.drained.is_complete(),
            self.drained.to_string(),
        );
        check(
            "finished in time",
            self.elapsed <= self.time_limit,
            format!(
                "{:.1}s, limit {:.0}s",
                self.elapsed.as_secs_f64(),
                self.time_limit.as_secs_f64()
            ),
        );
        checks
    }
}

/// Whether a late request's answer (status, body) says its session expired.
fn told_expired(answer: &(u16, String)) -> bool {
    let (status, body) = answer;
    *status == 404 && body.contains("\"BLOB_UPLOAD_UNKNOWN\"") && body.contains("expired")
}

/// Something per cut reason, as `idle …, rate …, response …`.
fn by_cut_reason(each: impl Fn(CutReason) -> String) -> String {
    CutReason::ALL
        .iter()
        .map(|&reason| format!("{} {}", reason.label(), each(reason)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The range of `times` as `1.1-1.6s` (`1.1s` when one value; `-` when none).
fn span(times: impl Iterator<Item = Duration>) -> String {
    let times: Vec<f64> = times.map(|t| t.as_secs_f64()).collect();
    let lo = times.iter().copied().reduce(f64::min);
    let hi = times.iter().copied().reduce(f64::max);
    match (lo, hi) {
        (Some(lo), Some(hi)) if format!("{lo:.1}") == format!("{hi:.1}") => format!("{lo:.1}s"),
        (Some(lo), Some(hi)) => format!("{lo:.1}-{hi:.1}s"),
        _ => "-".into(),
    }
}

/// Something per way a lease ends, as `finished …, cancelled …, expired …,
/// drained …`.
fn by_how(each: impl Fn(LeaseEnd) -> String) -> String {
    LeaseEnd::ALL
        .iter()
        .map(|&how| format!("{} {}", how.label(), each(how)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn route_index(route: Route) -> usize {
    Route::ALL.iter().position(|&r| r == route).unwrap_or(0)
}

/// The value at quantile `q` of `sorted` (nearest rank).
fn quantile(sorted: &[Duration], q: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// A wait for people: `2.00s`, `380ms`, `0.2ms`, `0ms` (shed at arrival), `-` for
/// none.
#[must_use]
pub fn wait(d: Option<Duration>) -> String {
    match d {
        None => "-".into(),
        Some(d) if d.is_zero() => "0ms".into(),
        Some(d) if d >= Duration::from_secs(1) => format!("{:.2}s", d.as_secs_f64()),
        Some(d) if d >= Duration::from_millis(10) => format!("{}ms", d.as_millis()),
        Some(d) => format!("{:.1}ms", d.as_secs_f64() * 1e3),
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let retry: Vec<u64> = self
            .retry_after
            .iter()
            .filter_map(|v| v.parse().ok())
            .collect();
        let retry_range = match (retry.iter().min(), retry.iter().max()) {
            (Some(lo), Some(hi)) if lo == hi => format!("Retry-After {lo}s"),
            (Some(lo), Some(hi)) => format!("Retry-After {lo}-{hi}s"),
            _ => "no Retry-After".into(),
        };
        writeln!(
            f,
            "summary: {} ({:.1}s)",
            self.title(),
            self.elapsed.as_secs_f64()
        )?;
        writeln!(
            f,
            "  requests  {}: {} admitted (200, a session 202), {} shed (503, {retry_range}), {} cancelled (hung up while parked){}",
            self.clients,
            self.admitted,
            self.shed_total(),
            self.hung_up,
            if self.unavailable + self.failures.len() > 0 {
                format!(", {} other", self.unavailable + self.failures.len())
            } else {
                String::new()
            }
        )?;
        writeln!(
            f,
            "            shed by route: upload {}, mirror {}, session {}; by reason: {}",
            self.shed[0],
            self.shed[1],
            self.shed[2],
            by_reason(|reason| self.shed_for(reason)),
        )?;
        let [resumed, other] = self.by_class;
        writeln!(
            f,
            "            shed by class: critical_plus (resumed uploads) {} of {}, critical {} of {}; \
             by size: 1 unit {}, 2 units {}",
            resumed.1,
            resumed.0,
            other.1,
            other.0,
            self.shed[0] + self.shed[2],
            self.shed[1],
        )?;
        writeln!(
            f,
            "            server saw {} hang-ups as Cancelled, {} after admission",
            self.server.cancelled, self.server.body_errors,
        )?;
        let (c, s) = (&self.session_clients, &self.sessions);
        writeln!(
            f,
            "  sessions  {} clients ran an upload session: {} opened (202), {} shed; {} finished (PUT 201), {} cancelled (DELETE 204), {} went quiet",
            c.clients, c.opened, self.shed[2], c.finished, c.cancelled, c.went_quiet,
        )?;
        writeln!(
            f,
            "            leases ended: {}; idle limit {}",
            by_how(|how| format!("{} ({:.1} unit-s)", s.ended(how), s.unit_seconds(how))),
            secs(self.idle_limit),
        )?;
        if !self.stallers.is_empty() || !self.slow.is_empty() {
            let (tricklers, _) = self.stallers_cut(StallKind::Trickle);
            let (patches, _) = self.stallers_cut(StallKind::Patch);
            let cut: Vec<&StallerResult> = self.stallers.iter().filter(|s| s.cut()).collect();
            let answered_408 = cut
                .iter()
                .filter(|s| {
                    s.ended
                        .is_some_and(|(_, end)| end == StallEnd::Answered(408))
                })
                .count();
            writeln!(
                f,
                "  stalled   {} stallers ({tricklers} trickle, {patches} PATCH): {} cut after {} ({answered_408} told 408, {} closed); cuts by reason: {}; stalled sessions told expired when back: {} of {}",
                self.stallers.len(),
                cut.len(),
                span(cut.iter().filter_map(|s| s.ended.map(|(at, _)| at))),
                cut.len() - answered_408,
                by_cut_reason(|reason| self.cuts_for(reason).to_string()),
                self.session_clients.stalled_told_expired,
                self.session_clients.stalled,
            )?;
            let served: Vec<&SlowResult> =
                self.slow.iter().filter(|s| s.answer == Ok(200)).collect();
            writeln!(
                f,
                "            {} slow clients at {}/s: {} served (200) after {}, {} not served",
                self.slow.len(),
                bytes(SLOW_RATE as u64),
                served.len(),
                span(served.iter().map(|s| s.took)),
                self.slow.len() - served.len(),
            )?;
        }
        writeln!(
            f,
            "  units     peak in use {}/{} (gate, sampled every 2ms), {}/{} (units_in_use gauge, {} scrapes); at the end {}",
            self.peak_in_use,
            self.capacity,
            self.peak_in_use_scraped,
            self.capacity,
            self.scrapes,
            self.in_use_at_end,
        )?;
        writeln!(
            f,
            "  wait      admitted ({}): p50 {}, p99 {} (max {})",
            self.waits.len(),
            wait(self.wait_quantile(0.5)),
            wait(self.wait_quantile(0.99)),
            wait(self.waits.last().copied()),
        )?;
        writeln!(
            f,
            "            time to shed ({}): p50 {}, p99 {} (max {}); wait budget {}",
            self.shed_waits.len(),
            wait(self.shed_wait_quantile(0.5)),
            wait(self.shed_wait_quantile(0.99)),
            wait(self.shed_waits.last().copied()),
            secs(self.wait_budget),
        )?;
        match self.overload_target {
            None => writeln!(f, "  overload  no target: the wait budget alone")?,
            Some(target) => {
                let spans = self.overloaded();
                // A fold from 0.0: an empty float `sum` is -0.0, printed "-0.0".
                let time = spans.iter().fold(0.0, |all, (from, to)| all + (to - from));
                writeln!(
                    f,
                    "  overload  target {}: overloaded {} time(s), {time:.1}s in all; a request parked while overloaded waits at most {}",
                    secs(target),
                    spans.len(),
                    secs(target * 2),
                )?;
            }
        }
        writeln!(f, "  shutdown  {}", self.drained)?;
        writeln!(f, "  /metrics  (excerpt, after the load)")?;
        for line in self.after.excerpt() {
            writeln!(f, "            {line}")?;
        }
        writeln!(f, "checks")?;
        for c in &self.checks {
            writeln!(
                f,
                "  {} {}{}",
                if c.ok { "ok  " } else { "FAIL" },
                c.name,
                if c.ok {
                    String::new()
                } else {
                    format!(": {}", c.detail)
                }
            )?;
        }
        write!(f, "{}", self.verdict())
    }
}

/// The same load against the fixed wait budget and against an overload target.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// The run with the fixed wait budget alone.
    pub fixed: Report,
    /// The run with the overload target; `None` with `--overload-target off`.
    pub target: Option<Report>,
}

impl Comparison {
    /// The runs, fixed first.
    pub fn runs(&self) -> impl Iterator<Item = &Report> {
        std::iter::once(&self.fixed).chain(&self.target)
    }

    /// Whether every check held in every run.
    #[must_use]
    pub fn passed(&self) -> bool {
        self.runs().all(Report::passed)
    }

    /// The `PASS: …` or `FAIL: …` line over every run.
    #[must_use]
    pub fn verdict(&self) -> String {
        let failed: Vec<_> = self.runs().filter(|r| !r.passed()).collect();
        if failed.is_empty() {
            let counts: Vec<_> = self
                .runs()
                .map(|r| format!("{} in the {} run", r.checks.len(), r.title()))
                .collect();
            format!("PASS: every check held: {}", counts.join(", "))
        } else {
            let runs: Vec<_> = failed
                .iter()
                .map(|r| format!("the {} run: {}", r.title(), r.verdict()))
                .collect();
            format!("FAIL: {}", runs.join("; "))
        }
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let pair = |a: Option<Duration>, b: Option<Duration>| format!("{} / {}", wait(a), wait(b));
        writeln!(
            f,
            "comparison: the same load ({} clients), one row per gate",
            self.fixed.clients
        )?;
        writeln!(
            f,
            "  {:<24} {:>8} {:>5}  {:>22}  {:>23}  {:>10}",
            "gate",
            "admitted",
            "shed",
            "time to shed p50 / p99",
            "admitted wait p50 / p99",
            "peak units"
        )?;
        for r in self.runs() {
            writeln!(
                f,
                "  {:<24} {:>8} {:>5}  {:>22}  {:>23}  {:>10}",
                r.title(),
                r.admitted,
                r.shed_total(),
                pair(r.shed_wait_quantile(0.5), r.shed_wait_quantile(0.99)),
                pair(r.wait_quantile(0.5), r.wait_quantile(0.99)),
                format!("{}/{}", r.peak_in_use, r.capacity),
            )?;
        }
        write!(f, "{}", self.verdict())
    }
}
