//! States that cross a boundary (a store column, JSON, the FFI) as a closed set of names: each
//! is an enum with its stored name (`as_str`, `parse`), serde and JSON Schema as that name,
//! SQLite conversion (an unknown name in a row is a damaged row, never a guess) and equality
//! with the name, so `status == "active"` still reads naturally.

/// Defines a state enum: `state_enum! { /// doc  pub enum Name { /// doc  Variant => "name", … } }`.
macro_rules! state_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash,
            serde::Serialize, serde::Deserialize, schemars::JsonSchema,
        )]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $text)] $variant ),+
        }

        impl $name {
            /// Every state, in order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The stored name.
            pub fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }

            /// The state named `s`.
            pub fn parse(s: &str) -> Option<Self> {
                match s { $($text => Some(Self::$variant),)+ _ => None }
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::state::UnknownState;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::parse(s).ok_or_else(|| $crate::state::UnknownState {
                    what: stringify!($name),
                    given: s.chars().take(64).collect(),
                    expected: Self::ALL.iter().map(|v| v.as_str()).collect(),
                })
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.as_str()
            }
        }

        impl rusqlite::types::FromSql for $name {
            fn column_result(
                value: rusqlite::types::ValueRef<'_>,
            ) -> rusqlite::types::FromSqlResult<Self> {
                let s = value.as_str()?;
                Self::parse(s).ok_or_else(|| {
                    rusqlite::types::FromSqlError::Other(
                        format!("unknown {} {s:?}", stringify!($name)).into(),
                    )
                })
            }
        }

        impl rusqlite::types::ToSql for $name {
            fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
                Ok(self.as_str().into())
            }
        }
    };
}

pub(crate) use state_enum;

/// A name that is none of a state enum's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {given:?}: expected one of {}", expected.join(", "))]
pub struct UnknownState {
    /// The enum.
    pub what: &'static str,
    /// The name given (at most 64 characters of it).
    pub given: String,
    /// The names it has.
    pub expected: Vec<&'static str>,
}
