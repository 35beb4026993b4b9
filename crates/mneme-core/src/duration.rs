//! `Span`: a configured duration, written the way people write them (`250ms`, `30s`,
//! `5m`, `1h`, `2d`, a bare number of seconds, or jiff's friendly and ISO 8601 forms such
//! as `1h 30m` and `PT90S`), parsed once when the configuration is read.
//!
//! Serialized back in the shortest exact unit, so `mneme config show` prints what a user
//! would write.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The longest duration accepted anywhere in the configuration.
pub const MAX_SPAN: Duration = Duration::from_secs(365 * 86400);

/// A non-negative duration of at most a year.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span(Duration);

impl Span {
    pub const fn secs(secs: u64) -> Span {
        Span(Duration::from_secs(secs))
    }

    pub const fn millis(ms: u64) -> Span {
        Span(Duration::from_millis(ms))
    }

    pub const fn get(self) -> Duration {
        self.0
    }

    pub const fn is_zero(self) -> bool {
        self.0.is_zero()
    }
}

impl std::str::FromStr for Span {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_duration(s).map(Span)
    }
}

/// `250ms`, `10s`, `30m`, `1h`, `2d`; a bare number is seconds; anything else jiff reads
/// as a `SignedDuration` (`1h 30m`, `2 hours`, `PT90S`). At most 365 days, never negative.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let simple = num.parse::<f64>().ok().and_then(|n| {
        let factor = match unit.trim() {
            "ms" => 0.001,
            "" | "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            _ => return None,
        };
        Some(n * factor)
    });
    let secs = match simple {
        Some(secs) => secs,
        None => match t.parse::<jiff::SignedDuration>() {
            Ok(d) => d.as_secs_f64(),
            Err(_) => return Err(format!("{s:?} is not a duration like 30s, 5m, 1h or 1h 30m (units: ms, s, m, h, d)")),
        },
    };
    if !(0.0..=MAX_SPAN.as_secs_f64()).contains(&secs) {
        return Err(format!("{s:?} is out of range (0 to 365d)"));
    }
    Ok(Duration::from_secs_f64(secs))
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = self.0.as_millis();
        let sub_ms = !self.0.subsec_nanos().is_multiple_of(1_000_000);
        if sub_ms {
            return write!(f, "{}s", self.0.as_secs_f64());
        }
        if !ms.is_multiple_of(1000) {
            return write!(f, "{ms}ms");
        }
        let s = self.0.as_secs();
        match s {
            0 => write!(f, "0s"),
            _ if s.is_multiple_of(86400) => write!(f, "{}d", s / 86400),
            _ if s.is_multiple_of(3600) => write!(f, "{}h", s / 3600),
            _ if s.is_multiple_of(60) => write!(f, "{}m", s / 60),
            _ => write!(f, "{s}s"),
        }
    }
}

impl fmt::Debug for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Span({self})")
    }
}

impl Serialize for Span {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Text(String),
            Secs(u64),
            Float(f64),
        }
        let parsed = match Raw::deserialize(d)? {
            Raw::Text(t) => parse_duration(&t),
            Raw::Secs(n) => parse_duration(&n.to_string()),
            Raw::Float(x) => parse_duration(&x.to_string()),
        };
        parsed.map(Span).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_jiff_forms_and_round_trip() {
        for (text, ms) in [("250ms", 250), ("30m", 1_800_000), ("2", 2000), ("1h 30m", 5_400_000), ("PT90S", 90_000), ("1.5s", 1500)] {
            let span: Span = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(span.get().as_millis(), ms, "{text}");
            assert_eq!(span.to_string().parse::<Span>().expect("round trip"), span, "{text} round trip");
        }
        assert_eq!(Span::secs(5400).to_string(), "90m");
        assert_eq!(Span::secs(86400 * 2).to_string(), "2d");
        for bad in ["", "5 weeks", "soon", "-1s", "400d"] {
            assert!(bad.parse::<Span>().is_err(), "{bad:?} accepted");
        }
    }
}
