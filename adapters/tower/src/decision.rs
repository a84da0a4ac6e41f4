//! What the caller's closure says about one request.

use admit::Priority;

/// The caller's decision for one request, made from its head
/// ([`http::request::Parts`]) before the body is touched.
///
/// Non-exhaustive: a later version may add a decision (and fields to
/// [`Admit`](Self::Admit)), so build one with [`Decision::admit`] or
/// [`Decision::Bypass`], and match it with a wildcard arm.
///
/// # Examples
///
/// ```
/// use admit_tower::Decision;
/// use http::request::Parts;
///
/// admit::sources! {
///     /// Where an upload session is opened.
///     pub enum Route { Upload => "upload", Mirror => "mirror" }
/// }
///
/// fn decide(head: &Parts) -> Decision<Route> {
///     match head.uri.path() {
///         "/upload" => Decision::admit(1, Route::Upload),
///         "/mirror" => Decision::admit(2, Route::Mirror),
///         _ => Decision::Bypass, // health checks, /metrics: never wait, hold nothing
///     }
/// }
///
/// let (head, ()) = http::Request::get("/mirror").body(()).unwrap().into_parts();
/// assert_eq!(decide(&head), Decision::admit(2, Route::Mirror));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Decision<S> {
    /// Wait (up to the gate's budget, or the request's [`WaitCeiling`](crate::WaitCeiling))
    /// for `units` units on behalf of `source`, then call the inner service holding them.
    ///
    /// Built with [`Decision::admit`].
    #[non_exhaustive]
    Admit {
        /// Units the request holds while its response is produced and sent. Never
        /// 0: [`Decision::admit`] checks it.
        units: usize,
        /// The call site, for the gate's metrics.
        source: S,
        /// The request's priority class: who the gate sheds first. `None`: the
        /// source's ([`Source::priority`](admit::Source::priority)). Set with
        /// [`Decision::priority`].
        priority: Option<Priority>,
    },
    /// Call the inner service at once, holding nothing: health checks, `/metrics`,
    /// anything cheap that must answer while the gate is full.
    ///
    /// A bypassed request carries no [`AdmitPermit`](crate::AdmitPermit): a handler
    /// that serves it takes the permit as an `Option` (see there). The progress
    /// rule does not watch it.
    Bypass,
    /// Call the inner service at once, holding no units, but watch its progress
    /// as an admitted request's ([`ProgressRule`](crate::ProgressRule)): for a
    /// request whose body fills memory held by units elsewhere, such as a `PATCH`
    /// that appends to an upload session whose [lease](admit::Leases) holds the
    /// unit. A cut is counted for `source`.
    ///
    /// Built with [`Decision::watch`].
    #[non_exhaustive]
    Watch {
        /// The call site, for the gate's metrics.
        source: S,
    },
}

impl<S> Decision<S> {
    /// [`Decision::Admit`] with `units` units for `source`.
    ///
    /// # Panics
    ///
    /// If `units == 0`: a zero-unit admission would hold nothing, and only a
    /// composition bug produces one (the gate panics likewise).
    #[must_use]
    pub fn admit(units: usize, source: S) -> Self {
        assert!(units > 0, "admit_tower::Decision::admit: zero units");
        Self::Admit {
            units,
            source,
            priority: None,
        }
    }

    /// [`Decision::Watch`] for `source`: no units, the progress rule on.
    #[must_use]
    pub const fn watch(source: S) -> Self {
        Self::Watch { source }
    }

    /// The same decision with the request's priority class (a `Bypass` or a
    /// `Watch` is left as it is: it waits for nothing). A resumed upload outranks a new one:
    ///
    /// ```
    /// use admit::Priority;
    /// use admit_tower::Decision;
    /// use http::request::Parts;
    ///
    /// admit::sources! { pub enum Route { Upload => "upload" } }
    ///
    /// fn decide(head: &Parts) -> Decision<Route> {
    ///     let resumed = head.headers.contains_key(http::header::CONTENT_RANGE);
    ///     Decision::admit(1, Route::Upload).priority(if resumed {
    ///         Priority::CriticalPlus
    ///     } else {
    ///         Priority::Critical
    ///     })
    /// }
    /// # let (head, ()) = http::Request::patch("/upload").header("content-range", "0-1").body(()).unwrap().into_parts();
    /// # assert_eq!(decide(&head), Decision::admit(1, Route::Upload).priority(Priority::CriticalPlus));
    /// ```
    #[must_use]
    pub fn priority(self, class: Priority) -> Self {
        match self {
            Self::Admit { units, source, .. } => Self::Admit {
                units,
                source,
                priority: Some(class),
            },
            other => other,
        }
    }
}
