//! Call-site labels from a closed set known at compile time, so any per-source
//! metric has a cardinality bounded by construction.

/// A closed set of call-site labels.
///
/// Declare one with [`sources!`](crate::sources).
pub trait Source: Copy + Send + Sync + 'static {
    /// Every value of the type, in declaration order.
    const ALL: &'static [Self];

    /// This value's label: `snake_case`, stable, used as a metric label value.
    fn label(self) -> &'static str;

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

/// Declares a fieldless enum implementing [`Source`].
///
/// ```
/// admit::sources! {
///     /// Where an upload session is opened.
///     pub enum Route {
///         NpmPublish => "npm_publish",
///         CargoPublish => "cargo_publish",
///     }
/// }
/// use admit::Source;
/// assert_eq!(Route::NpmPublish.label(), "npm_publish");
/// assert_eq!(Route::ALL.len(), 2);
/// ```
#[macro_export]
macro_rules! sources {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $label:literal ),+ $(,)?
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
        }
    };
}
