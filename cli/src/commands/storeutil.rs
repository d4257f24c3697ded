//! Helpers shared by the store commands: opening the store, resolving ID
//! prefixes, human sizes, ages and UTC times, and the progress bar of a
//! transfer (import, push, pull).

use std::io::IsTerminal;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use rrstore_format::RecordingId;
use rrstore_store::Store;

use crate::Globals;

/// Open the store named by `--store` (which must be a store), `$RRSTORE_DIR`
/// or the XDG default.
pub fn open(globals: &Globals) -> anyhow::Result<Store> {
    let store = Store::open_default(globals.store.as_deref(), &globals.store_settings)
        .context("cannot open the store")?;
    Ok(store)
}

/// [`open`] for commands that add to the store: a `--store` directory that
/// is not a store yet is created.
pub fn open_or_create(globals: &Globals) -> anyhow::Result<Store> {
    let store = Store::open_default_create(globals.store.as_deref(), &globals.store_settings)
        .context("cannot open the store")?;
    Ok(store)
}

/// Resolve several ID prefixes.
pub fn resolve_all(store: &Store, prefixes: &[String]) -> anyhow::Result<Vec<RecordingId>> {
    prefixes
        .iter()
        .map(|p| store.resolve(p).map_err(anyhow::Error::from))
        .collect()
}

/// `1.2 MiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[i])
    }
}

/// `3m`, `2h`, `5d` since `t` (Unix seconds).
pub fn age(t: i64, now: i64) -> String {
    let d = (now - t).max(0);
    match d {
        0..=59 => format!("{d}s"),
        60..=3599 => format!("{}m", d / 60),
        3600..=86399 => format!("{}h", d / 3600),
        _ => format!("{}d", d / 86400),
    }
}

/// `a / b` as `12.3x`, or `-` when b is 0.
pub fn ratio(a: u64, b: u64) -> String {
    if b == 0 {
        "-".into()
    } else {
        format!("{:.2}x", a as f64 / b as f64)
    }
}

/// Parse `--since`: `YYYY-MM-DD`, `YYYY-MM-DDTHH:MM[:SS]` (UTC), or an age
/// like `30m`, `12h`, `7d`, `2w`.
pub fn parse_since(s: &str, now: i64) -> Result<i64, String> {
    let bad = || {
        format!("`{s}` is not a date: use YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS] (UTC) or an age like 12h, 7d")
    };
    let t = s.trim();
    if let Some(unit) = t.chars().last().filter(|c| c.is_ascii_alphabetic()) {
        let n: i64 = t[..t.len() - 1].parse().map_err(|_| bad())?;
        let mul = match unit {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86400,
            'w' => 7 * 86400,
            _ => return Err(bad()),
        };
        return Ok(now - n * mul);
    }
    let (date, time) = t.split_once(['T', ' ']).unwrap_or((t, "00:00:00"));
    let dp: Vec<i64> = date
        .split('-')
        .map(|x| x.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let tp: Vec<i64> = time
        .split(':')
        .map(|x| x.parse().map_err(|_| bad()))
        .collect::<Result<_, _>>()?;
    let [y, m, d] = dp[..] else { return Err(bad()) };
    let (hh, mm, ss) = match tp[..] {
        [h, m] => (h, m, 0),
        [h, m, s] => (h, m, s),
        _ => return Err(bad()),
    };
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return Err(bad());
    }
    Ok(days_from_civil(y, m, d) * 86400 + hh * 3600 + mm * 60 + ss)
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// Unix seconds as `YYYY-MM-DD HH:MM:SS` UTC.
pub fn utc(secs: i64) -> String {
    rrstore_report::time::iso_datetime(secs).replacen('T', " ", 1)
}

/// A progress bar of bytes out of `total` on stderr when it is a terminal
/// and not `quiet`; hidden otherwise.
pub fn bytes_bar(quiet: bool, total: u64) -> ProgressBar {
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(total);
    b.set_style(
        ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} {bytes_per_sec} {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_utc() {
        assert_eq!(utc(0), "1970-01-01 00:00:00");
        assert_eq!(utc(1_709_210_096), "2024-02-29 12:34:56");
        assert_eq!(utc(-1), "1969-12-31 23:59:59");
    }

    #[test]
    fn since_parses_dates_and_ages() {
        assert_eq!(parse_since("1970-01-02", 0), Ok(86400));
        assert_eq!(parse_since("2000-03-01T00:00", 0), Ok(951868800));
        assert_eq!(parse_since("2h", 10000), Ok(10000 - 7200));
        assert!(parse_since("yesterday", 0).is_err());
    }
}
