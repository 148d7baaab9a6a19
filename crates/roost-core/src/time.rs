//! Timestamps as milliseconds since the Unix epoch, rendered as RFC 3339 in JSON.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A point in time stamped by the node that proposed a command. Never read from a clock
/// inside `apply`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Timestamp(pub i64);

impl Timestamp {
    pub fn millis(self) -> i64 {
        self.0
    }

    pub fn to_rfc3339(self) -> String {
        if let Some(text) = self.canonical(&mut [0u8; RFC3339_LEN]) {
            return text.to_string();
        }
        match chrono::DateTime::from_timestamp_millis(self.0) {
            Some(t) => t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            None => self.0.to_string(),
        }
    }

    /// RFC 3339 text: the canonical form `Timestamp`s are written in, read without chrono;
    /// any other form (an offset, no milliseconds, a leap second) through chrono.
    pub fn parse_rfc3339(s: &str) -> Option<Self> {
        parse_canonical(s.as_bytes()).or_else(|| {
            chrono::DateTime::parse_from_rfc3339(s)
                .ok()
                .map(|t| Timestamp(t.timestamp_millis()))
        })
    }

    /// The canonical text of a time in years 0-9999, put together in `buf`; `None` outside them.
    fn canonical(self, buf: &mut [u8; RFC3339_LEN]) -> Option<&str> {
        (FIRST_MS..=LAST_MS)
            .contains(&self.0)
            .then(|| rfc3339(self.0, buf))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl Serialize for Timestamp {
    /// RFC 3339 for years 0-9999, which it can express and read back; other times (a bad clock,
    /// a forged entry) as integer milliseconds, so every timestamp survives the log and the rows.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.canonical(&mut [0u8; RFC3339_LEN]) {
            Some(text) => s.serialize_str(text),
            None => s.serialize_i64(self.0),
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
const RFC3339_LEN: usize = 24;

/// 0000-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z, in milliseconds: the times the
/// canonical text can hold.
const FIRST_MS: i64 = -62_167_219_200_000;
const LAST_MS: i64 = 253_402_300_799_999;

const MS_PER_DAY: i64 = 86_400_000;

/// A time in years 0-9999 as RFC 3339 with milliseconds, UTC: what chrono's
/// `to_rfc3339_opts(SecondsFormat::Millis, true)` writes, put together in `buf` by integer
/// arithmetic. Every row, log entry and activity hash holds several times: through chrono's
/// date types, writing them took 91.0M of an apply's 1,679M instructions, 66.2M this way
/// (BENCHMARKS.md, "Apply on one thread").
fn rfc3339(ms: i64, buf: &mut [u8; RFC3339_LEN]) -> &str {
    let (days, in_day) = (ms.div_euclid(MS_PER_DAY), ms.rem_euclid(MS_PER_DAY));
    let (year, month, day) = civil_from_days(days);
    let fields: [(i64, usize, u8); 7] = [
        (year, 4, b'-'),
        (month, 2, b'-'),
        (day, 2, b'T'),
        (in_day / 3_600_000, 2, b':'),
        (in_day / 60_000 % 60, 2, b':'),
        (in_day / 1000 % 60, 2, b'.'),
        (in_day % 1000, 3, b'Z'),
    ];
    let mut at = 0;
    for (mut value, width, after) in fields {
        for i in (0..width).rev() {
            buf[at + i] = b'0' + (value % 10) as u8;
            value /= 10;
        }
        buf[at + width] = after;
        at += width + 1;
    }
    // Only ASCII digits and separators were written.
    std::str::from_utf8(buf).unwrap_or_default()
}

/// The canonical text `YYYY-MM-DDTHH:MM:SS.mmmZ` read back; `None` for any other text or a
/// date that does not exist (which chrono then refuses too).
fn parse_canonical(text: &[u8]) -> Option<Timestamp> {
    let text: &[u8; RFC3339_LEN] = text.try_into().ok()?;
    let separators = [
        (4, b'-'),
        (7, b'-'),
        (10, b'T'),
        (13, b':'),
        (16, b':'),
        (19, b'.'),
        (23, b'Z'),
    ];
    if separators.iter().any(|&(at, c)| text[at] != c) {
        return None;
    }
    let number = |from: usize, width: usize| -> Option<i64> {
        text[from..from + width].iter().try_fold(0i64, |n, &d| {
            d.is_ascii_digit().then(|| n * 10 + i64::from(d - b'0'))
        })
    };
    let (year, month, day) = (number(0, 4)?, number(5, 2)?, number(8, 2)?);
    let (hour, minute, second, milli) = (
        number(11, 2)?,
        number(14, 2)?,
        number(17, 2)?,
        number(20, 3)?,
    );
    if !(1..=12).contains(&month) || hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let days = days_from_civil(year, month, day);
    // A day past its month's end lands in the next month.
    if day < 1 || civil_from_days(days) != (year, month, day) {
        return None;
    }
    Some(Timestamp(
        days * MS_PER_DAY + hour * 3_600_000 + minute * 60_000 + second * 1000 + milli,
    ))
}

/// The proleptic Gregorian date of `days` since 1970-01-01, as (year, month, day): Howard
/// Hinnant's `civil_from_days`, over 400-year eras that start on March 1st.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let (era, day_of_era) = (z.div_euclid(146_097), z.rem_euclid(146_097));
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let march_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * march_month + 2) / 5 + 1;
    let month = if march_month < 10 {
        march_month + 3
    } else {
        march_month - 9
    };
    (year_of_era + era * 400 + i64::from(month <= 2), month, day)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (`days_from_civil`); a day past its
/// month's end counts on into the next month.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = year - i64::from(month <= 2);
    let (era, year_of_era) = (year.div_euclid(400), year.rem_euclid(400));
    let march_month = if month > 2 { month - 3 } else { month + 9 };
    let day_of_year = (153 * march_month + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

impl<'de> Deserialize<'de> for Timestamp {
    /// Integer milliseconds, or text: RFC 3339, or milliseconds in quotes (older versions wrote
    /// times they could not render that way). A visitor rather than an untagged enum: that
    /// buffered every time and built an error message for each one written as text.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(TimestampVisitor)
    }
}

struct TimestampVisitor;

impl serde::de::Visitor<'_> for TimestampVisitor {
    type Value = Timestamp;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an RFC 3339 time or integer milliseconds since the Unix epoch")
    }

    fn visit_i64<E: serde::de::Error>(self, ms: i64) -> Result<Timestamp, E> {
        Ok(Timestamp(ms))
    }

    fn visit_u64<E: serde::de::Error>(self, ms: u64) -> Result<Timestamp, E> {
        i64::try_from(ms)
            .map(Timestamp)
            .map_err(|_| E::invalid_value(serde::de::Unexpected::Unsigned(ms), &self))
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Timestamp, E> {
        Timestamp::parse_rfc3339(s)
            .or_else(|| s.parse().ok().map(Timestamp))
            .ok_or_else(|| E::custom(format!("invalid RFC 3339 timestamp: {s}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_json() {
        let t = Timestamp(1_763_769_600_123);
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, "\"2025-11-22T00:00:00.123Z\"");
        assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap(), t);
    }

    /// Regression (timestamps_outside_years_0_to_9999_broke_the_log): such a time was written
    /// as text that could not be read back, so an entry carrying one stopped a node's restart.
    #[test]
    fn times_outside_years_0_to_9999_round_trip_as_millis() {
        for ms in [i64::MIN, -62_167_219_200_001, 253_402_300_800_000, i64::MAX] {
            let t = Timestamp(ms);
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(json, ms.to_string());
            assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap(), t);
        }
        let old = format!("\"{}\"", i64::MAX);
        assert_eq!(
            serde_json::from_str::<Timestamp>(&old).unwrap(),
            Timestamp(i64::MAX)
        );
    }

    /// The time is written without chrono's `to_rfc3339_opts`, which must stay the format:
    /// every row and log entry written before holds it, and hashes cover it.
    #[test]
    fn times_are_written_as_chrono_renders_them() {
        let mut samples = vec![
            0,
            1,
            -1,
            999,
            -62_167_219_200_000, // 0000-01-01
            253_402_300_799_999, // 9999-12-31T23:59:59.999
            951_782_400_000,     // 2000-02-29
            1_763_769_600_123,
        ];
        // A spread over years 0-9999 (a linear congruential walk: no randomness in tests).
        let (lo, span) = (-62_167_219_200_000_i64, 315_569_519_999_999_u64);
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..20_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            samples.push(lo + (x % span) as i64);
        }
        for ms in samples {
            let chrono_text = chrono::DateTime::from_timestamp_millis(ms)
                .unwrap()
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            let json = serde_json::to_string(&Timestamp(ms)).unwrap();
            assert_eq!(json, format!("\"{chrono_text}\""), "at {ms} ms");
            assert_eq!(Timestamp(ms).to_rfc3339(), chrono_text, "at {ms} ms");
            // Read back without chrono, to what chrono reads.
            assert_eq!(parse_canonical(chrono_text.as_bytes()), Some(Timestamp(ms)));
            assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap().0, ms);
        }
    }

    /// Text that is not the canonical form, or names no real time, reads as chrono reads it:
    /// the fast path refuses it and chrono decides.
    #[test]
    fn text_off_the_canonical_form_reads_as_chrono_reads_it() {
        for text in [
            "2024-02-29T12:00:00.000Z",      // a leap day
            "2025-02-29T12:00:00.000Z",      // no such day
            "2100-02-29T00:00:00.000Z",      // no leap day in 2100
            "2000-02-29T00:00:00.000Z",      // but in 2000
            "2025-04-31T00:00:00.000Z",      // April has 30 days
            "2025-00-10T00:00:00.000Z",      // no month 0
            "2025-13-01T00:00:00.000Z",      // nor 13
            "2025-01-00T00:00:00.000Z",      // no day 0
            "2025-01-01T24:00:00.000Z",      // no hour 24
            "2025-01-01T23:60:00.000Z",      // no minute 60
            "2016-12-31T23:59:60.000Z",      // a leap second, which chrono reads
            "2025-01-01t00:00:00.000z",      // lower case, which chrono reads
            "2025-01-01T00:00:00Z",          // no milliseconds
            "2025-01-01T00:00:00.123456Z",   // microseconds
            "2025-01-01T02:00:00.000+02:00", // an offset
            "2025-01-01T00:00:00.00aZ",      // not a digit
            "+025-01-01T00:00:00.000Z",      // a sign
            "0000-01-01T00:00:00.000Z",      // the first canonical time
            "9999-12-31T23:59:59.999Z",      // and the last
        ] {
            let chrono_ms = chrono::DateTime::parse_from_rfc3339(text)
                .ok()
                .map(|t| t.timestamp_millis());
            assert_eq!(
                Timestamp::parse_rfc3339(text).map(Timestamp::millis),
                chrono_ms,
                "{text}"
            );
        }
    }

    #[test]
    fn what_is_not_a_time_is_refused_with_what_a_time_is() {
        // serde_json reads -0 and 1e3 as floats: neither was a time before either.
        for bad in [
            "1.5",
            "-0",
            "1e3",
            "true",
            "\"yesterday\"",
            "18446744073709551615",
            "null",
        ] {
            let err = serde_json::from_str::<Timestamp>(bad)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("RFC 3339"),
                "{bad}: the error should say what a time is, got {err}"
            );
        }
    }
}
