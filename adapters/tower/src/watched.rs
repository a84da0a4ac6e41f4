//! The request body the inner service sees: the client's body, watched by the
//! progress rule where the request is (see [`progress`](crate::progress)).

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use admit::CutReason;
use bytes::Buf;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::permit::Release;
use crate::progress::{BodyCut, BoxSleep, RECHECK};
use crate::BoxError;

pin_project! {
    /// The body of every request [`Admit`](crate::Admit) passes on: the client's
    /// body, unchanged for a bypassed request; for a watched one (admitted, or
    /// [`Decision::watch`](crate::Decision::watch)) cut by the
    /// [`ProgressRule`](crate::ProgressRule) when its client stalls or trickles:
    /// its next read fails with [`BodyCut`].
    ///
    /// The rule's clock runs only while the handler waits on a read: from a read
    /// that found nothing until the next frame.
    pub struct WatchedBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Unwatched { #[pin] body: B },
        Watched {
            #[pin]
            body: B,
            slot: Arc<dyn Release>,
            clock: Clock,
        },
        Cut { reason: CutReason, reported: bool },
    }
}

/// The client's time on one watched body.
#[derive(Default)]
struct Clock {
    /// Time the handler waited on reads that have ended.
    waited: Duration,
    /// Since when the handler waits now, if it does.
    waiting_since: Option<Duration>,
    /// Data bytes delivered.
    received: u64,
    /// The sleep until the next look, and its deadline.
    sleep: Option<(Duration, BoxSleep)>,
}

impl<B> WatchedBody<B> {
    pub(crate) fn unwatched(body: B) -> Self {
        Self {
            kind: Kind::Unwatched { body },
        }
    }

    /// `body` watched through the rule in `slot` (unwatched if it has none).
    pub(crate) fn watched(body: B, slot: Arc<dyn Release>) -> Self {
        if slot.watch().is_none() {
            return Self::unwatched(body);
        }
        Self {
            kind: Kind::Watched {
                body,
                slot,
                clock: Clock::default(),
            },
        }
    }

    /// Whether the progress rule watches this body.
    #[must_use]
    pub fn is_watched(&self) -> bool {
        !matches!(self.kind, Kind::Unwatched { .. })
    }
}

impl<B> Body for WatchedBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut kind = self.project().kind;
        let cut = match kind.as_mut().project() {
            KindProj::Unwatched { body } => return body.poll_frame(cx).map_err(Into::into),
            KindProj::Cut { reason, reported } => {
                return if *reported {
                    Poll::Ready(None)
                } else {
                    *reported = true;
                    Poll::Ready(Some(Err(Box::new(BodyCut::new(*reason)))))
                };
            }
            KindProj::Watched { body, slot, clock } => match poll_watched(body, &**slot, clock, cx)
            {
                Ok(poll) => return poll,
                Err(reason) => reason,
            },
        };
        // The client's body is dropped now: what hyper buffered for it goes.
        kind.set(Kind::Cut {
            reason: cut,
            reported: true,
        });
        Poll::Ready(Some(Err(Box::new(BodyCut::new(cut)))))
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Unwatched { body } | Kind::Watched { body, .. } => body.is_end_stream(),
            Kind::Cut { reported, .. } => *reported,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Unwatched { body } | Kind::Watched { body, .. } => body.size_hint(),
            Kind::Cut { .. } => SizeHint::with_exact(0),
        }
    }
}

type Polled<D> = Poll<Option<Result<Frame<D>, BoxError>>>;

/// One read of a watched body: the frame, or the reason to cut it.
fn poll_watched<B>(
    mut body: Pin<&mut B>,
    slot: &dyn Release,
    clock: &mut Clock,
    cx: &mut Context<'_>,
) -> Result<Polled<B::Data>, CutReason>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    let watch = slot.watch().expect("a watched body's slot has a watch");
    loop {
        if let Some(reason) = watch.cut_reason() {
            return Err(reason);
        }
        match body.as_mut().poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(since) = clock.waiting_since.take() {
                    clock.waited += watch.gate.now().saturating_sub(since);
                }
                if let Some(data) = frame.data_ref() {
                    clock.received = clock.received.saturating_add(data.remaining() as u64);
                }
                return Ok(Poll::Ready(Some(Ok(frame))));
            }
            Poll::Ready(other) => return Ok(Poll::Ready(other.map(|r| r.map_err(Into::into)))),
            Poll::Pending => {}
        }
        let now = watch.gate.now();
        let since = *clock.waiting_since.get_or_insert(now);
        let limits = watch.rule.at(watch.gate.pressure());
        let idle = now.saturating_sub(since);
        let waited = clock.waited + idle;
        let allowance = watch.rule.allowance(limits.grace, clock.received);
        let reason = if idle >= limits.idle {
            Some(CutReason::Idle)
        } else if waited >= allowance {
            Some(CutReason::Rate)
        } else {
            None
        };
        if let Some(reason) = reason {
            watch.cut(reason, waited);
            // Another party may have cut it first, for its own reason.
            return Err(watch.cut_reason().unwrap_or(reason));
        }
        let next = (since + limits.idle)
            .min(now + (allowance - waited))
            .min(now + RECHECK);
        if clock.sleep.as_ref().is_none_or(|(at, _)| *at > next) {
            clock.sleep = Some((next, watch.gate.sleep_until(next)));
        }
        let (_, sleep) = clock.sleep.as_mut().expect("armed above");
        match sleep.as_mut().poll(cx) {
            // Time for another look.
            Poll::Ready(()) => clock.sleep = None,
            Poll::Pending => return Ok(Poll::Pending),
        }
    }
}

impl<B> fmt::Debug for WatchedBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::Unwatched { .. } => "unwatched",
            Kind::Watched { .. } => "watched",
            Kind::Cut { .. } => "cut",
        };
        f.debug_struct("WatchedBody").field("kind", &kind).finish()
    }
}
