//! Civil (proleptic Gregorian, UTC) dates from Unix seconds, for the formats Steward prints.

/// A UTC calendar date and time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CivilTime {
    /// Year.
    pub year: i64,
    /// Month, 1–12.
    pub month: u32,
    /// Day of the month, 1–31.
    pub day: u32,
    /// Hour, 0–23.
    pub hour: u32,
    /// Minute, 0–59.
    pub minute: u32,
    /// Second, 0–59.
    pub second: u32,
    /// Day of the week, 0 = Sunday.
    pub weekday: u32,
}

impl CivilTime {
    /// The UTC calendar time of `ts` Unix seconds (Howard Hinnant's civil-from-days).
    pub fn from_unix(ts: i64) -> Self {
        let days = ts.div_euclid(86_400);
        let secs = ts.rem_euclid(86_400);
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = doy - (153 * mp + 2) / 5 + 1;
        let month = if mp < 10 { mp + 3 } else { mp - 9 };
        let small = |v: i64| u32::try_from(v).unwrap_or(0);
        Self {
            year: yoe + era * 400 + i64::from(month <= 2),
            month: small(month),
            day: small(day),
            hour: small(secs / 3600),
            minute: small(secs % 3600 / 60),
            second: small(secs % 60),
            weekday: small((days + 4).rem_euclid(7)),
        }
    }

    /// RFC 3339 in UTC (`2025-07-01T10:00:00Z`).
    pub fn rfc3339(&self) -> String {
        format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

/// A date that is neither `YYYY-MM-DD` nor RFC 3339.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid date {0:?}: expected YYYY-MM-DD or RFC 3339 (2026-06-01T09:30:00Z)")]
pub struct InvalidDate(pub String);

impl crate::StewardError for InvalidDate {
    fn code(&self) -> &'static str {
        "INVALID_DATE"
    }

    fn kind(&self) -> crate::ErrorKind {
        crate::ErrorKind::InvalidInput
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days-from-civil).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Now, in Unix seconds (0 before 1970, saturating far in the future).
pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// An RFC 3339 instant that states its offset (`Z` or `±hh:mm`): no date-only form, no local
/// time left to guess.
pub fn parse_instant(text: &str) -> Result<i64, InvalidDate> {
    let t = text.trim();
    let tail = t.get(t.len().saturating_sub(6)..).unwrap_or("");
    let explicit = t.contains('T')
        && (t.ends_with(['Z', 'z'])
            || (tail.starts_with(['+', '-']) && tail.get(3..4) == Some(":")));
    if !explicit {
        return Err(InvalidDate(text.to_owned()));
    }
    parse_date(t)
}

/// Parses `YYYY-MM-DD` (midnight UTC) or RFC 3339 (`2026-06-01T09:30:00Z`, `…+02:00`, with
/// optional fractional seconds, which are dropped) into Unix seconds.
pub fn parse_date(text: &str) -> Result<i64, InvalidDate> {
    let bad = || InvalidDate(text.to_owned());
    let t = text.trim();
    let b = t.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Result<i64, InvalidDate> {
        let s = t.get(r).ok_or_else(bad)?;
        if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
            return Err(bad());
        }
        s.parse().map_err(|_| bad())
    };
    if b.len() < 10 || b[4] != b'-' || b[7] != b'-' {
        return Err(bad());
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(bad());
    }
    let mut secs = days_from_civil(year, month, day) * 86_400;
    if b.len() == 10 {
        return Ok(secs);
    }
    if b.len() < 20 || !matches!(b[10], b'T' | b't' | b' ') || b[13] != b':' || b[16] != b':' {
        return Err(bad());
    }
    let (h, m, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if h > 23 || m > 59 || sec > 60 {
        return Err(bad());
    }
    secs += h * 3600 + m * 60 + sec;
    let mut rest = &t[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && rest.as_bytes()[3] == b':' => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return Err(bad()),
            };
            let oh: i64 = rest[1..3].parse().map_err(|_| bad())?;
            let om: i64 = rest[4..6].parse().map_err(|_| bad())?;
            if oh > 23 || om > 59 {
                return Err(bad());
            }
            sign * (oh * 3600 + om * 60)
        }
        _ => return Err(bad()),
    };
    Ok(secs - offset)
}

#[cfg(test)]
mod tests {
    use super::{CivilTime, parse_date};

    #[test]
    fn parses_dates_and_rejects_the_rest() {
        assert_eq!(parse_date("1970-01-01"), Ok(0));
        assert_eq!(parse_date("2025-07-01T10:00:00Z"), Ok(1_751_364_000));
        assert_eq!(parse_date("2025-07-01T12:00:00+02:00"), Ok(1_751_364_000));
        assert_eq!(parse_date("2025-07-01T10:00:00.123Z"), Ok(1_751_364_000));
        assert_eq!(parse_date("2000-02-29"), Ok(951_782_400));
        for bad in [
            "",
            "2025-13-01",
            "2025-02-29",
            "2025-7-1",
            "01/07/2025",
            "2025-07-01T25:00:00Z",
            "2025-07-01T10:00:00",
            "2025-07-01T10:00:00+2",
            "yesterday",
            "2025-07-01Z",
        ] {
            let e = parse_date(bad).unwrap_err();
            assert_eq!(crate::StewardError::code(&e), "INVALID_DATE", "{bad}");
        }
        for ts in [0, 951_782_400, 1_751_364_000, 4_102_444_800] {
            let c = CivilTime::from_unix(ts);
            assert_eq!(parse_date(&c.rfc3339()), Ok(ts));
        }
    }

    #[test]
    fn known_dates() {
        assert_eq!(CivilTime::from_unix(0).rfc3339(), "1970-01-01T00:00:00Z");
        assert_eq!(CivilTime::from_unix(0).weekday, 4);
        assert_eq!(CivilTime::from_unix(1_751_364_000).rfc3339(), "2025-07-01T10:00:00Z");
        assert_eq!(CivilTime::from_unix(1_751_364_000).weekday, 2);
        assert_eq!(CivilTime::from_unix(951_782_400).rfc3339(), "2000-02-29T00:00:00Z");
        assert_eq!(CivilTime::from_unix(-86_400).rfc3339(), "1969-12-31T00:00:00Z");
    }
}
