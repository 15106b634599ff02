//! Durations on the command line: `500ms`, `30s`, `1.5s`, `2m`, `1h`, or a bare number of
//! seconds (`30`). Ranges are the core's to check (a lease below its minimum is the core's
//! `INVALID_ARGUMENT`), not this parser's.

use std::time::Duration;

/// Parses one duration argument (clap's value parser for every `D` option).
pub fn parse(text: &str) -> Result<Duration, String> {
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 0.001,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("{text:?} is not a duration (use e.g. 500ms, 30s, 2m, 1h)")),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a duration (use e.g. 500ms, 30s, 2m, 1h)"))?;
    let secs = value * scale;
    // The core's longest duration is 30 days; anything longer is refused here already, so the
    // conversion below cannot overflow.
    if secs > 30.0 * 24.0 * 3600.0 {
        return Err(format!("{text:?} is longer than 30 days"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_bare_seconds() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
    }

    #[test]
    fn malformed_is_refused() {
        for bad in ["", "s", "ten", "5 s", "-1s", "1.2.3s", "5d", "1e9", "99999h"] {
            assert!(parse(bad).is_err(), "{bad:?} was accepted");
        }
    }
}
