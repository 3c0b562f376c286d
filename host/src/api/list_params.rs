//! Query parameters of the admin list routes, parsed by hand so that each bad
//! one gets a 400 whose code names it (`INVALID_PAGE`, `INVALID_LIMIT`,
//! `INVALID_START_DATE`, ...).

use std::collections::HashMap;

use chrono::{DateTime, Duration, NaiveDate, Utc};
use serde_json::{Value, json};

use crate::error::AdminError;

/// Query parameters as axum's `Query` extractor hands them over.
pub type Params = HashMap<String, String>;

pub fn check_known(p: &Params, known: &[&str]) -> Result<(), AdminError> {
    if let Some(k) = p.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(AdminError::invalid_param("INVALID_PARAMETER", format!("unknown query parameter `{k}`; known: {}", known.join(", "))));
    }
    Ok(())
}

pub fn int_param(p: &Params, name: &str, code: &'static str, default: u64, min: u64, max: u64) -> Result<u64, AdminError> {
    match p.get(name) {
        None => Ok(default),
        Some(s) => match s.trim().parse::<u64>() {
            Ok(v) if (min..=max).contains(&v) => Ok(v),
            _ => Err(AdminError::invalid_param(code, format!("`{name}` must be a whole number from {min} to {max}, got `{s}`"))),
        },
    }
}

/// ISO 8601: a date-time with offset (`2026-11-23T10:00:00Z`), one without
/// (taken as UTC), or a date (`2026-11-23`, its midnight UTC; as an end
/// date, the end of that day).
pub fn parse_date(s: &str, end_of_day: bool) -> Option<DateTime<Utc>> {
    let s = s.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    if let Ok(t) = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f") {
        return Some(t.and_utc());
    }
    if let Ok(d) = NaiveDate::parse_from_str(s, "%Y-%m-%d") {
        let t = d.and_hms_opt(0, 0, 0)?.and_utc();
        return Some(if end_of_day { t + Duration::days(1) - Duration::milliseconds(1) } else { t });
    }
    None
}

pub fn pagination(page: u64, limit: u64, total: u64) -> Value {
    json!({"page": page, "limit": limit, "total": total, "pages": total.div_ceil(limit)})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::iso;

    #[test]
    fn dates() {
        assert!(parse_date("2026-11-23T10:00:00Z", false).is_some());
        assert!(parse_date("2026-11-23T10:00:00+02:00", false).is_some());
        assert!(parse_date("2026-11-23T10:00:00", false).is_some());
        let d = parse_date("2026-11-23", false).expect("date");
        assert_eq!(iso(d), "2026-11-23T00:00:00.000Z");
        let e = parse_date("2026-11-23", true).expect("date");
        assert_eq!(iso(e), "2026-11-23T23:59:59.999Z");
        assert!(parse_date("yesterday", false).is_none());
        assert!(parse_date("2026-13-01", false).is_none());
    }

    #[test]
    fn pages() {
        assert_eq!(pagination(1, 20, 0)["pages"], 0);
        assert_eq!(pagination(1, 20, 41)["pages"], 3);
    }
}
