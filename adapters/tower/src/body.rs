//! The response body: the inner service's body with the permit riding inside it, or
//! the layer's own short answer.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::permit::Hold;
use crate::progress::{self, BodyCut, Watch};
use crate::reject::ClientGone;
use crate::BoxError;

pin_project! {
    /// The body of every response of [`Admit`](crate::Admit): the inner service's
    /// body, carrying the request's permit until it has yielded its last frame, failed,
    /// or been dropped; or the layer's own answer to a refused request.
    ///
    /// An upload or a download session is the body, not the handler: a handler
    /// returning a streaming body returns at once, and the units stay held while the
    /// stream is sent. When hyper drops the body (the client went away mid-stream),
    /// the units return with it.
    pub struct AdmitBody<B> {
        #[pin]
        kind: Kind<B>,
        hold: Hold,
        // Whether the progress rule's watch of the response runs.
        watching: bool,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Inner { #[pin] body: B },
        Full { data: Option<Bytes> },
        Gone { reported: bool },
    }
}

impl<B> AdmitBody<B> {
    pub(crate) fn inner(body: B, hold: Hold) -> Self {
        Self {
            kind: Kind::Inner { body },
            hold,
            watching: false,
        }
    }

    pub(crate) fn full(data: Bytes) -> Self {
        Self {
            kind: Kind::Full {
                data: (!data.is_empty()).then_some(data),
            },
            hold: Hold::none(),
            watching: false,
        }
    }

    /// A body that fails on its first poll, so that hyper closes the connection
    /// instead of finishing a response nobody is there to read.
    pub(crate) fn gone() -> Self {
        Self {
            kind: Kind::Gone { reported: false },
            hold: Hold::none(),
            watching: false,
        }
    }

    /// The same refusal body, for another inner body type.
    pub(crate) fn retype<C>(self) -> AdmitBody<C> {
        let kind = match self.kind {
            Kind::Full { data } => Kind::Full { data },
            Kind::Gone { reported } => Kind::Gone { reported },
            Kind::Inner { .. } => unreachable!("only a refusal is retyped"),
        };
        AdmitBody {
            kind,
            hold: self.hold,
            watching: false,
        }
    }

    /// Whether this body still holds units (its request's permit, not yet released).
    #[must_use]
    pub fn holds_permit(&self) -> bool {
        self.hold.is_held()
    }
}

impl<B> Body for AdmitBody<B>
where
    B: Body,
    B::Data: From<Bytes>,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        match this.kind.project() {
            KindProj::Inner { mut body } => {
                if let Some(reason) = this.hold.watch().and_then(Watch::cut_reason) {
                    // Hyper ends the stream and drops the body, the units with it.
                    return Poll::Ready(Some(Err(Box::new(BodyCut::new(reason)))));
                }
                let polled = body.as_mut().poll_frame(cx);
                // The bytes of a frame handed with more to follow.
                let handed = match &polled {
                    Poll::Ready(Some(Ok(frame))) if !body.is_end_stream() => {
                        Some(frame.data_ref().map_or(0, |d| d.remaining() as u64))
                    }
                    _ => None,
                };
                watch_response(this.hold, this.watching, handed, polled.is_pending());
                match polled {
                    Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(frame))),
                    Poll::Ready(Some(Err(e))) => {
                        this.hold.release();
                        Poll::Ready(Some(Err(e.into())))
                    }
                    Poll::Ready(None) => {
                        // The last frame is out: the session is over.
                        this.hold.release();
                        Poll::Ready(None)
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
            KindProj::Full { data } => {
                Poll::Ready(data.take().map(|d| Ok(Frame::data(B::Data::from(d)))))
            }
            KindProj::Gone { reported } => {
                if *reported {
                    Poll::Ready(None)
                } else {
                    *reported = true;
                    Poll::Ready(Some(Err(Box::new(ClientGone))))
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body } => body.is_end_stream(),
            Kind::Full { data } => data.is_none(),
            Kind::Gone { reported } => *reported,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } => body.size_hint(),
            Kind::Full { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
            Kind::Gone { .. } => SizeHint::default(),
        }
    }
}

/// The progress rule's part in one read of a response body: a frame of
/// `handed` bytes with more to follow starts the watch of the response (once) and
/// dates the frame hyper now holds; a read the handler's body left pending says
/// the client is not the one late.
fn watch_response(hold: &Hold, watching: &mut bool, handed: Option<u64>, pending: bool) {
    match (handed, pending) {
        (Some(bytes), _) => {
            let (Some(slot), Some(watch)) = (hold.slot(), hold.watch()) else {
                return;
            };
            watch.response_handed(bytes);
            if !*watching {
                *watching = true;
                let _ = watch
                    .gate
                    .spawn(Box::new(progress::watch_response(Arc::clone(slot))));
            }
        }
        (None, true) if *watching => {
            if let Some(watch) = hold.watch() {
                watch.response_busy();
            }
        }
        _ => {}
    }
}

impl<B> fmt::Debug for AdmitBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &self.kind {
            Kind::Inner { .. } => "inner",
            Kind::Full { .. } => "rejection",
            Kind::Gone { .. } => "client gone",
        };
        f.debug_struct("AdmitBody")
            .field("kind", &kind)
            .field("holds_permit", &self.hold.is_held())
            .finish()
    }
}
