//! Priority classes: who a gate sheds first (Google SRE's criticality).

use core::fmt;

/// How much a request matters when a gate must shed someone: four classes, as
/// Google's criticality has them.
///
/// Priority never reorders the queue: requests are granted in arrival order,
/// within and across classes. It decides **who is shed** when the gate is about
/// to shed someone: the lowest class first, waiters already parked included
/// (they end with [`GateError::Busy`](crate::GateError::Busy) and
/// [`ShedReason::Outranked`](crate::ShedReason::Outranked)). A request already
/// granted keeps its units: nothing admitted is revoked. Without a queue,
/// priority changes nothing. The rules are in [`Gate`]'s docs, "Priority".
///
/// Ordered by importance: `CriticalPlus > Critical > SheddablePlus > Sheddable`.
#[doc = alloc_item_link!("Gate", "Gate", "struct.Gate.html")]
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(u8)]
pub enum Priority {
    /// Shed first: work that may be dropped at no cost (a prefetch, a batch
    /// job that will retry).
    Sheddable = 0,
    /// Shed before any critical request (work whose loss is noticed but
    /// tolerated: a retried background sync).
    SheddablePlus = 1,
    /// The default: a user is waiting for it.
    #[default]
    Critical = 2,
    /// Shed last, and never for another request: the gate's most important
    /// work (a resumed upload with most of its bytes sent, a health check).
    CriticalPlus = 3,
}

impl Priority {
    /// Every class, most important first.
    pub const ALL: [Priority; 4] = [
        Priority::CriticalPlus,
        Priority::Critical,
        Priority::SheddablePlus,
        Priority::Sheddable,
    ];

    /// Its metric label value: `critical_plus`, `critical`, `sheddable_plus`,
    /// `sheddable`.
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            Priority::CriticalPlus => "critical_plus",
            Priority::Critical => "critical",
            Priority::SheddablePlus => "sheddable_plus",
            Priority::Sheddable => "sheddable",
        }
    }

    /// Its rank in the queue's shedding: 0 is shed first.
    #[cfg(feature = "alloc")]
    pub(crate) const fn rank(self) -> u8 {
        self as u8
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}
