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
        match chrono::DateTime::from_timestamp_millis(self.0) {
            Some(t) => t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            None => self.0.to_string(),
        }
    }

    pub fn parse_rfc3339(s: &str) -> Option<Self> {
        chrono::DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| Timestamp(t.timestamp_millis()))
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
        use chrono::Datelike;
        match chrono::DateTime::from_timestamp_millis(self.0) {
            Some(t) if (0..=9999).contains(&t.year()) => {
                let mut buf = [0u8; RFC3339_LEN];
                s.serialize_str(rfc3339(&t, &mut buf))
            }
            _ => s.serialize_i64(self.0),
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
const RFC3339_LEN: usize = 24;

/// A time in years 0-9999 as RFC 3339 with milliseconds, UTC: what chrono's
/// `to_rfc3339_opts(SecondsFormat::Millis, true)` writes, put together in `buf` instead of a new
/// String. Every row and log entry holds several times: writing them was 1.7% of a cluster's
/// samples at 64 clients, 1.2% now (BENCHMARKS.md, "Where a write's CPU goes at 64 clients").
fn rfc3339<'b>(t: &chrono::DateTime<chrono::Utc>, buf: &'b mut [u8; RFC3339_LEN]) -> &'b str {
    use chrono::{Datelike, Timelike};
    let fields: [(u32, usize, u8); 7] = [
        (t.year().unsigned_abs(), 4, b'-'),
        (t.month(), 2, b'-'),
        (t.day(), 2, b'T'),
        (t.hour(), 2, b':'),
        (t.minute(), 2, b':'),
        (t.second(), 2, b'.'),
        (t.timestamp_subsec_millis() % 1000, 3, b'Z'),
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
            assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap().0, ms);
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
