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
                s.serialize_str(&t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
            }
            _ => s.serialize_i64(self.0),
        }
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Repr {
            Millis(i64),
            Text(String),
        }
        match Repr::deserialize(d)? {
            Repr::Millis(ms) => Ok(Timestamp(ms)),
            // Older versions wrote times they could not render as quoted milliseconds.
            Repr::Text(s) => Timestamp::parse_rfc3339(&s)
                .or_else(|| s.parse().ok().map(Timestamp))
                .ok_or_else(|| {
                    serde::de::Error::custom(format!("invalid RFC 3339 timestamp: {s}"))
                }),
        }
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
}
