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

#[cfg(test)]
mod tests {
    use super::CivilTime;

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
