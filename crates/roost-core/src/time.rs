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
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_rfc3339())
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
            Repr::Text(s) => Timestamp::parse_rfc3339(&s).ok_or_else(|| {
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
}
