//! Times and durations as the rules' messages, the report and the dashboard show them: one
//! conversion from the microseconds runs record, one UTC form, one clock form and one duration
//! form, so that a time reads the same wherever it is shown.

/// Microseconds as seconds.
pub fn seconds(us: u64) -> f64 {
    us as f64 / 1e6
}

/// Microseconds since the epoch as UTC, to the millisecond (`2020-06-10 00:15:09.250 UTC`); a
/// time chrono cannot place says so in microseconds.
pub fn utc(time_us: u64) -> String {
    i64::try_from(time_us)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_micros)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string())
        .unwrap_or_else(|| format!("{time_us} µs since the epoch"))
}

/// Seconds as a clock, `h:mm:ss` from an hour on, else `m:ss`, rounded to the second; `-` when
/// not finite.
pub fn clock(seconds: f64) -> String {
    if !seconds.is_finite() {
        return "-".to_owned();
    }
    let sign = if seconds < 0.0 { "-" } else { "" };
    let total = seconds.abs().round() as u64;
    let (h, m, s) = (total / 3600, (total / 60) % 60, total % 60);
    if h > 0 {
        format!("{sign}{h}:{m:02}:{s:02}")
    } else {
        format!("{sign}{m}:{s:02}")
    }
}

/// A duration in seconds: three decimals (`12.345 s`); from two minutes on one decimal and the
/// [`clock`] form beside it (`130.5 s (2:11)`).
pub fn duration(seconds: f64) -> String {
    if seconds >= 120.0 {
        format!("{seconds:.1} s ({})", clock(seconds))
    } else {
        format!("{seconds:.3} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_of_microseconds() {
        assert_eq!(seconds(0), 0.0);
        assert_eq!(seconds(1_500_000), 1.5);
        assert_eq!(seconds(1), 1e-6);
    }

    #[test]
    fn utc_formats_a_known_time_and_names_one_it_cannot_place() {
        assert_eq!(utc(1_591_748_109_250_000), "2020-06-10 00:15:09.250 UTC");
        assert_eq!(utc(0), "1970-01-01 00:00:00.000 UTC");
        assert_eq!(utc(u64::MAX), format!("{} µs since the epoch", u64::MAX));
    }

    #[test]
    fn clock_reads_minutes_and_hours() {
        assert_eq!(clock(3_725.0), "1:02:05");
        assert_eq!(clock(65.0), "1:05");
        assert_eq!(clock(0.4), "0:00");
        assert_eq!(clock(59.6), "1:00");
        assert_eq!(clock(-65.0), "-1:05");
        assert_eq!(clock(f64::NAN), "-");
        assert_eq!(clock(f64::INFINITY), "-");
    }

    #[test]
    fn a_duration_has_milliseconds_until_two_minutes_then_a_clock() {
        assert_eq!(duration(0.0), "0.000 s");
        assert_eq!(duration(12.3456), "12.346 s");
        assert_eq!(duration(119.9994), "119.999 s");
        assert_eq!(duration(120.0), "120.0 s (2:00)");
        assert_eq!(duration(3_725.04), "3725.0 s (1:02:05)");
    }
}
