//! Time formatting for API responses: ISO 8601 in UTC with millisecond precision.

use chrono::{DateTime, SecondsFormat, Utc};

pub fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}
