//! Call-site labels from a closed set known at compile time, so any per-source
//! metric has a cardinality bounded by construction.

use super::priority::Priority;

/// A closed set of call-site labels.
///
/// Declare one with [`sources!`](crate::sources). A hand-written impl must keep
/// `ALL[s.index()] == s` (by label) for every value: a gate checks it at each
/// admission and panics there if not, before it counts anything; a permit keeps
/// the index and label it was admitted with, so its release calls no `Source`
/// code.
pub trait Source: Copy + Send + Sync + 'static {
    /// Every value of the type, in declaration order.
    const ALL: &'static [Self];

    /// This value's label: `snake_case`, stable, used as a metric label value.
    fn label(self) -> &'static str;

    /// The priority class of this call site's requests unless an acquire says
    /// otherwise ([`GateAcquire::priority`]): [`Priority::Critical`] by
    /// default; `sources!` sets it with `as`.
    #[doc = alloc_item_link!("GateAcquire::priority", "GateAcquire::priority", "struct.GateAcquire.html#method.priority")]
    fn priority(self) -> Priority {
        Priority::Critical
    }

    /// This value's position in [`ALL`](Self::ALL). The default finds it by label;
    /// [`sources!`](crate::sources) implements it in O(1).
    fn index(self) -> usize {
        let label = self.label();
        Self::ALL
            .iter()
            .position(|s| s.label() == label)
            .expect("a source's label is one of `ALL`'s")
    }
}

/// `source`'s position in [`Source::ALL`] and its label, checked against each
/// other once, at admission: a permit keeps both, so neither its drop nor its
/// release calls `Source` code, and a hand-written impl that disagrees with its
/// `ALL` fails here, before any count is touched.
///
/// # Panics
///
/// If `ALL[source.index()]` does not have `source`'s label.
#[cfg(feature = "alloc")]
pub(crate) fn position_of<S: Source>(source: S) -> (usize, &'static str) {
    let (index, label) = (source.index(), source.label());
    assert!(
        S::ALL.get(index).is_some_and(|s| s.label() == label),
        "admit: the source {label:?} says its index in `Source::ALL` is {index}, which \
         holds another label or none: a hand-written `Source` impl disagrees with its \
         `ALL` (`admit::sources!` cannot)"
    );
    (index, label)
}

/// Declares a fieldless enum implementing [`Source`].
///
/// Each label must be `snake_case` (a lowercase ASCII letter, then lowercase
/// letters, digits and single underscores, not ending in one) and unique within
/// the enum: two sources with one label would merge into one metric series. Both
/// are checked when the macro expands, and the error names the label.
///
/// A source's default [`Priority`](crate::Priority) follows its label with
/// `as` (a variant of `Priority`); without it, `Critical`.
///
/// ```
/// admit::sources! {
///     /// Where an upload session is opened.
///     pub enum Route {
///         NpmPublish => "npm_publish",
///         CargoPublish => "cargo_publish",
///         Prefetch => "prefetch" as Sheddable,
///     }
/// }
/// use admit::{Priority, Source};
/// assert_eq!(Route::NpmPublish.label(), "npm_publish");
/// assert_eq!(Route::ALL.len(), 3);
/// assert_eq!(Route::NpmPublish.priority(), Priority::Critical);
/// assert_eq!(Route::Prefetch.priority(), Priority::Sheddable);
/// ```
///
/// ```compile_fail
/// admit::sources! { enum Route { Upload => "upload", Mirror => "upload" } }
/// ```
///
/// ```compile_fail
/// admit::sources! { enum Route { Upload => "Not A Label!" } }
/// ```
///
/// ```compile_fail
/// admit::sources! { enum Route { Upload => "" } }
/// ```
#[macro_export]
macro_rules! sources {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $label:literal $(as $priority:ident)? ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $crate::Source for $name {
            const ALL: &'static [Self] = &[ $( Self::$variant, )+ ];

            fn label(self) -> &'static str {
                match self {
                    $( Self::$variant => $label, )+
                }
            }

            fn index(self) -> usize {
                self as usize
            }

            fn priority(self) -> $crate::Priority {
                match self {
                    $( Self::$variant => $crate::__priority!($($priority)?), )+
                }
            }
        }

        const _: () = {
            const LABELS: &[&str] = &[ $( $label, )+ ];
            $(
                assert!(
                    $crate::__label_is_snake_case($label),
                    concat!(
                        "admit::sources!: the label ", stringify!($label), " of `",
                        stringify!($name), "::", stringify!($variant),
                        "` is not snake_case (a lowercase ASCII letter, then lowercase \
                         letters, digits and single underscores)"
                    )
                );
                assert!(
                    $crate::__label_count(LABELS, $label) == 1,
                    concat!(
                        "admit::sources!: the label ", stringify!($label),
                        " is declared twice in `", stringify!($name),
                        "`: the two sources would share one metric series"
                    )
                );
            )+
        };
    };
}

/// The priority a `sources!` variant names, or `Critical`.
#[doc(hidden)]
#[macro_export]
macro_rules! __priority {
    () => {
        $crate::Priority::Critical
    };
    ($priority:ident) => {
        $crate::Priority::$priority
    };
}

/// Whether `label` is `snake_case`: what [`sources!`] accepts.
#[doc(hidden)]
#[must_use]
pub const fn __label_is_snake_case(label: &str) -> bool {
    let bytes = label.as_bytes();
    if bytes.is_empty() || !bytes[0].is_ascii_lowercase() || bytes[bytes.len() - 1] == b'_' {
        return false;
    }
    let mut i = 1;
    while i < bytes.len() {
        let b = bytes[i];
        let ok =
            b.is_ascii_lowercase() || b.is_ascii_digit() || (b == b'_' && bytes[i - 1] != b'_');
        if !ok {
            return false;
        }
        i += 1;
    }
    true
}

/// How many of `labels` equal `label`: what [`sources!`] requires to be one.
#[doc(hidden)]
#[must_use]
pub const fn __label_count(labels: &[&str], label: &str) -> usize {
    let mut count = 0;
    let mut i = 0;
    while i < labels.len() {
        let (a, b) = (labels[i].as_bytes(), label.as_bytes());
        if a.len() == b.len() {
            let mut j = 0;
            while j < a.len() && a[j] == b[j] {
                j += 1;
            }
            if j == a.len() {
                count += 1;
            }
        }
        i += 1;
    }
    count
}

#[cfg(all(test, not(any(admit_loom, admit_shuttle))))]
mod tests {
    use super::*;

    #[test]
    fn snake_case_labels_are_lowercase_words_joined_by_single_underscores() {
        for ok in ["upload", "npm_publish", "v2", "a1_b2"] {
            assert!(__label_is_snake_case(ok), "{ok}");
        }
        for bad in [
            "",
            "Upload",
            "not a label",
            "_x",
            "x_",
            "a__b",
            "2fa",
            "a-b",
            "é",
        ] {
            assert!(!__label_is_snake_case(bad), "{bad}");
        }
    }

    #[test]
    fn labels_are_counted_by_their_bytes() {
        let labels = ["a", "ab", "b", "ab"];
        assert_eq!(__label_count(&labels, "ab"), 2);
        assert_eq!(__label_count(&labels, "a"), 1);
        assert_eq!(__label_count(&labels, "c"), 0);
    }
}
