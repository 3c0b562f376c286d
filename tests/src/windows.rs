//! Rate limits count in fixed calendar windows (per UTC minute, hour, day and
//! month), so a test that needs several requests counted in one window must
//! not start them just before that window rolls over.

use std::time::Duration;

use chrono::{DateTime, Utc};

pub const MINUTE: Duration = Duration::from_secs(60);
pub const DAY: Duration = Duration::from_secs(86_400);

/// How long to wait, at `now`, so that at least `room` is left in the current
/// UTC window of length `window` (a minute, an hour or a day: these start at
/// multiples of their length since the Unix epoch). Zero when there already is.
pub fn wait_for_room(now: DateTime<Utc>, window: Duration, room: Duration) -> Duration {
    let since_epoch = Duration::from_millis(u64::try_from(now.timestamp_millis()).expect("after 1970"));
    let into = Duration::from_millis((since_epoch.as_millis() % window.as_millis()) as u64);
    let left = window - into;
    if left >= room {
        Duration::ZERO
    } else {
        // Into the next window, plus a margin for clock reads on both sides.
        left + Duration::from_millis(50)
    }
}

/// Sleep, if needed, until at least `room` is left in the current UTC window
/// of length `window`, so requests made within `room` count in one window.
pub async fn room_in_window(window: Duration, room: Duration) {
    assert!(room < window / 2, "a {window:?} window cannot promise {room:?}");
    let wait = wait_for_room(Utc::now(), window, room);
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().expect("rfc3339")
    }

    #[test]
    fn waits_only_when_the_window_is_nearly_over() {
        let room = Duration::from_secs(15);
        assert_eq!(wait_for_room(at("2026-11-26T10:00:00Z"), MINUTE, room), Duration::ZERO);
        assert_eq!(wait_for_room(at("2026-11-26T10:00:45Z"), MINUTE, room), Duration::ZERO);
        assert_eq!(wait_for_room(at("2026-11-26T10:00:45.5Z"), MINUTE, room), Duration::from_millis(14_550));
        assert_eq!(wait_for_room(at("2026-11-26T10:00:59.9Z"), MINUTE, room), Duration::from_millis(150));
        assert_eq!(wait_for_room(at("2026-11-26T10:00:59.9Z"), DAY, room), Duration::ZERO);
        assert_eq!(wait_for_room(at("2026-11-26T23:59:50Z"), DAY, room), Duration::from_millis(10_050));
    }
}
