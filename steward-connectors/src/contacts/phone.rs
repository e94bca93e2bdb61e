//! Phone numbers in E.164 with the `phonenumber` crate (libphonenumber's numbering plans): a
//! number written with its country code is read as it is; one without is read in the
//! person's region when one is set; a number that cannot be read is kept as written.

pub use phonenumber::country::Id as Region;

/// Longest phone text read, characters.
/// Fixed (not a setting).
const MAX_PHONE_CHARS: usize = 64;

/// `raw` (`tel:+1-418-656-9254;ext=102`, `06 1234 5678`) in E.164 (`+390612345678`), or as
/// written (trimmed) when no numbering plan reads it; `None` when empty.
pub fn e164(raw: &str, region: Option<Region>) -> Option<String> {
    let t = raw.trim();
    let t = t.strip_prefix("tel:").unwrap_or(t).trim();
    if t.is_empty() || t.chars().count() > MAX_PHONE_CHARS {
        return (!t.is_empty()).then(|| t.chars().take(MAX_PHONE_CHARS).collect());
    }
    // `;ext=…` and other URI parameters are not part of the number.
    let number = t.split(';').next().unwrap_or(t);
    let parsed = phonenumber::parse(region, number).ok().filter(phonenumber::is_valid);
    Some(match parsed {
        Some(n) => n.format().mode(phonenumber::Mode::E164).to_string(),
        None => t.to_owned(),
    })
}

/// A region from its ISO 3166 code (`IT`, `us`).
pub fn region(code: &str) -> Option<Region> {
    code.trim().to_ascii_uppercase().parse().ok()
}

/// A text that is not an ISO 3166 region code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a region code (IT, US…)")]
pub struct BadRegion(pub String);

impl steward_core::StewardError for BadRegion {
    fn code(&self) -> &'static str {
        "CONTACTS_BAD_REGION"
    }

    fn kind(&self) -> steward_core::ErrorKind {
        steward_core::ErrorKind::InvalidInput
    }
}

/// [`region`] of an optional code, a typed error when the code is not one.
pub fn parse_region(code: Option<&str>) -> Result<Option<Region>, BadRegion> {
    code.map(|c| region(c).ok_or_else(|| BadRegion(c.to_owned()))).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_become_e164_in_their_region_or_stay_as_written() {
        let it = region("it");
        assert_eq!(e164("06 1234 5678", it).as_deref(), Some("+390612345678"));
        assert_eq!(e164("+39 333 123 4567", None).as_deref(), Some("+393331234567"));
        assert_eq!(e164("tel:+1-418-656-9254;ext=102", None).as_deref(), Some("+14186569254"));
        // Without a region a national number cannot be placed: kept as written.
        assert_eq!(e164("06 1234 5678", None).as_deref(), Some("06 1234 5678"));
        assert_eq!(e164("call me", it).as_deref(), Some("call me"));
        assert_eq!(e164("   ", it), None);
        assert_eq!(region("xx"), None);
    }
}
