//! `rrstore ls`: one aligned line per stored recording, filtered and sorted
//! from the index alone. The local listing is printed straight from the
//! store's compact table ([`LsTable`]) into one buffer; remote listings and
//! `--json` use the full summaries.

use std::borrow::Cow;
use std::io::Write;
use std::process::ExitCode;

use rrstore_report::names::display;
use rrstore_report::shown::{shown, shown_bytes, Shown};
use rrstore_store::recordings::parse_tag;

use crate::exit::UsageError;
use rrstore_store::{LsFilter, LsSort, LsTable, RecordingSummary};

use super::storeutil::{self, age, bytes};
use crate::Globals;

#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Sort {
    Time,
    Size,
    Name,
}

#[derive(clap::Args)]
pub struct Args {
    /// `NAME:` lists what remote NAME holds (from its manifests, no pull);
    /// `:` the configuration file's default remote.
    #[arg(value_name = "NAME:")]
    pub remote: Option<String>,
    /// Shell glob on the kernel name.
    #[arg(long, value_name = "GLOB")]
    pub kernel: Option<String>,
    /// Image target: sm_90, gfx942, x86_64, ...
    #[arg(long, value_name = "TARGET")]
    pub target: Option<String>,
    /// Only recordings with this tag (repeatable).
    #[arg(long = "tag", value_name = "K=V")]
    pub tags: Vec<String>,
    /// Shell glob on the label.
    #[arg(long, value_name = "GLOB")]
    pub label: Option<String>,
    /// Imported since: YYYY-MM-DD, YYYY-MM-DDTHH:MM or YYYY-MM-DDTHH:MM:SS (UTC), or an age (12h, 7d).
    #[arg(long, value_name = "DATE")]
    pub since: Option<String>,
    #[arg(long, value_enum, default_value = "time")]
    pub sort: Sort,
    /// JSON array of recordings.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let now = rrstore_store::now_unix();
    let since = match &args.since {
        Some(s) => Some(storeutil::parse_since(s, now).map_err(UsageError)?),
        None => None,
    };
    let filter = LsFilter {
        kernel: args.kernel,
        target: args.target,
        tags: args
            .tags
            .iter()
            .map(|t| parse_tag(t).map_err(|e| UsageError(e.to_string())))
            .collect::<Result<_, _>>()?,
        label: args.label,
        since,
        sort: match args.sort {
            Sort::Time => LsSort::Time,
            Sort::Size => LsSort::Size,
            Sort::Name => LsSort::Name,
        },
        ..Default::default()
    };
    let store = storeutil::open(globals)?;
    let remote = args
        .remote
        .as_deref()
        .map(|s| default_remote(s, globals))
        .transpose()?;
    let stdout = std::io::stdout();
    let out = stdout.lock();
    // Recordings of a remote whose manifest is corrupt: named at the end.
    let mut damaged = Vec::new();
    let written = match (&remote, args.json) {
        (None, false) => print_table(out, &store.list_table(&filter)?, now),
        (remote, json) => {
            let rows = match remote {
                Some(spec) => {
                    let (rows, bad) = super::remote::list_remote(&store, spec, &filter)?;
                    damaged = bad;
                    rows
                }
                None => store.list(&filter)?,
            };
            if json {
                print_json(out, &rows)
            } else {
                print_summaries(out, &rows, now)
            }
        }
    };
    match written {
        // `rrstore ls | head`: the reader is gone, nothing left to say
        // (quietly, with the code every command gives: README "Exit codes").
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            Ok(ExitCode::from(crate::exit::BROKEN_PIPE))
        }
        Err(e) => Err(anyhow::Error::new(e).context("cannot write the listing")),
        Ok(()) if damaged.is_empty() => Ok(ExitCode::SUCCESS),
        Ok(()) => {
            for d in &damaged {
                eprintln!(
                    "error: recording {} is not listed: {}",
                    Shown(&d.id),
                    Shown(&d.reason)
                );
            }
            eprintln!(
                "error: {} recording(s) on remote `{}` are damaged and were not listed (the others were); \
                 push them again from a store that has them",
                damaged.len(),
                remote.as_deref().unwrap_or_default().trim_end_matches(':')
            );
            Ok(ExitCode::from(crate::exit::CORRUPT))
        }
    }
}

/// `ls :` is the configured default remote.
fn default_remote(spec: &str, globals: &Globals) -> anyhow::Result<String> {
    if spec != ":" {
        return Ok(spec.to_string());
    }
    match &globals.remote {
        Some(r) => Ok(format!("{r}:")),
        None => Err(UsageError(
            "`ls :` lists the default remote, and the configuration file sets none: \
             name the remote (`rrstore ls NAME:`) or set `remote = \"NAME\"` there"
                .into(),
        )
        .into()),
    }
}

fn print_json(out: impl Write, rows: &[RecordingSummary]) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    serde_json::to_writer_pretty(&mut out, rows)?;
    writeln!(out)?;
    out.flush()
}

/// Remote listings (full summaries): the same columns as [`print_table`].
fn print_summaries(out: impl Write, rows: &[RecordingSummary], now: i64) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::with_capacity(1 << 16, out);
    // Names and labels come from whoever made the recording: escaped.
    let kernels: Vec<_> = rows.iter().map(|r| display(&r.kernel)).collect();
    let targets: Vec<_> = rows.iter().map(|r| shown(&r.target)).collect();
    let labels: Vec<_> = rows.iter().map(|r| shown(&r.label)).collect();
    let kw = kernels.iter().map(|k| k.len()).max().unwrap_or(6).max(6);
    let tw = targets.iter().map(|k| k.len()).max().unwrap_or(6).max(6);
    let lw = labels.iter().map(|k| k.len()).max().unwrap_or(5).max(5);
    writeln!(
        out,
        "{:<12}  {:<kw$}  {:<tw$}  {:>10}  {:>4}  {:<lw$}  {:>4}",
        "ID", "KERNEL", "TARGET", "SNAPSHOT", "ARGS", "LABEL", "AGE"
    )?;
    for (((r, kernel), target), label) in rows.iter().zip(&kernels).zip(&targets).zip(&labels) {
        writeln!(
            out,
            "{:<12}  {:<kw$}  {:<tw$}  {:>10}  {:>4}  {:<lw$}  {:>4}",
            &r.id[..12],
            kernel,
            target,
            bytes(r.input_size.unwrap_or(0)),
            r.num_args,
            label,
            age(r.imported_at, now)
        )?;
    }
    out.flush()
}

/// The local listing, formatted straight from the compact table into one
/// buffer written out in large pieces (no per-line allocation or
/// formatting machinery); the same bytes as [`print_summaries`].
fn print_table(mut out: impl Write, t: &LsTable, now: i64) -> std::io::Result<()> {
    // C++ kernels demangled (only those: most names are left as they are,
    // with no allocation).
    let shown: Vec<Option<String>> = t.rows().map(|r| demangled(t.kernel(r))).collect();
    // Names and labels come from whoever made the recording: escaped
    // (borrowed, no allocation, when there is nothing to escape).
    let kernels: Vec<Cow<[u8]>> = t
        .rows()
        .zip(&shown)
        .map(|(r, d)| {
            d.as_deref()
                .map_or_else(|| shown_bytes(t.kernel(r)), |d| Cow::Borrowed(d.as_bytes()))
        })
        .collect();
    let targets: Vec<Cow<[u8]>> = t.rows().map(|r| shown_bytes(t.target(r))).collect();
    let labels: Vec<Cow<[u8]>> = t.rows().map(|r| shown_bytes(t.label(r))).collect();
    let escaped = |v: &[Cow<[u8]>]| v.iter().any(|c| matches!(c, Cow::Owned(_)));
    let widest = |v: &[Cow<[u8]>]| v.iter().map(|c| c.len()).max().unwrap_or(0);
    let kw = if shown.iter().all(Option::is_none) && !escaped(&kernels) {
        t.kernel_width
    } else {
        widest(&kernels)
    }
    .max(6);
    let tw = if escaped(&targets) {
        widest(&targets)
    } else {
        t.target_width
    }
    .max(6);
    let lw = if escaped(&labels) {
        widest(&labels)
    } else {
        t.label_width
    }
    .max(5);
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 17);
    let head = format!(
        "{:<12}  {:<kw$}  {:<tw$}  {:>10}  {:>4}  {:<lw$}  {:>4}\n",
        "ID", "KERNEL", "TARGET", "SNAPSHOT", "ARGS", "LABEL", "AGE"
    );
    buf.extend_from_slice(head.as_bytes());
    // Consecutive rows often share a snapshot size: format it once.
    let mut size_key: Option<u64> = None;
    let mut size_txt = String::new();
    for (i, r) in t.rows().enumerate() {
        push_hex(&mut buf, &r.id[..6]);
        buf.extend_from_slice(b"  ");
        push_left(&mut buf, &kernels[i], kw);
        buf.extend_from_slice(b"  ");
        push_left(&mut buf, &targets[i], tw);
        buf.extend_from_slice(b"  ");
        let size = r.input_size.unwrap_or(0);
        if size_key != Some(size) {
            size_txt = bytes(size);
            size_key = Some(size);
        }
        push_right(&mut buf, size_txt.as_bytes(), 10);
        buf.extend_from_slice(b"  ");
        let mut num = [0u8; 20];
        push_right(&mut buf, decimal(r.num_args, &mut num), 4);
        buf.extend_from_slice(b"  ");
        push_left(&mut buf, &labels[i], lw);
        buf.extend_from_slice(b"  ");
        let mut a = [0u8; 21];
        push_right(&mut buf, age_bytes(r.imported_at, now, &mut a), 4);
        buf.push(b'\n');
        if buf.len() >= 1 << 16 {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    out.flush()
}

/// A kernel name with a C++ function demangled, None when it has none.
fn demangled(kernel: &[u8]) -> Option<String> {
    if !kernel.windows(2).any(|w| w == b"_Z") {
        return None;
    }
    let k = std::str::from_utf8(kernel).ok()?;
    match display(k) {
        std::borrow::Cow::Owned(d) => Some(d),
        std::borrow::Cow::Borrowed(_) => None,
    }
}

fn push_hex(buf: &mut Vec<u8>, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        buf.push(DIGITS[(b >> 4) as usize]);
        buf.push(DIGITS[(b & 15) as usize]);
    }
}

/// Display width as `format!`'s padding counts it (chars).
fn width(s: &[u8]) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        String::from_utf8_lossy(s).chars().count()
    }
}

fn push_left(buf: &mut Vec<u8>, s: &[u8], w: usize) {
    buf.extend_from_slice(s);
    buf.resize(buf.len() + w.saturating_sub(width(s)), b' ');
}

fn push_right(buf: &mut Vec<u8>, s: &[u8], w: usize) {
    buf.resize(buf.len() + w.saturating_sub(width(s)), b' ');
    buf.extend_from_slice(s);
}

/// `n` in decimal, in the tail of `tmp`.
fn decimal(mut n: u64, tmp: &mut [u8; 20]) -> &[u8] {
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &tmp[i..]
}

/// [`age`] without allocating.
fn age_bytes(t: i64, now: i64, tmp: &mut [u8; 21]) -> &[u8] {
    let d = (now - t).max(0) as u64;
    let (n, unit) = match d {
        0..=59 => (d, b's'),
        60..=3599 => (d / 60, b'm'),
        3600..=86399 => (d / 3600, b'h'),
        _ => (d / 86400, b'd'),
    };
    let mut digits = [0u8; 20];
    let s = decimal(n, &mut digits);
    tmp[..s.len()].copy_from_slice(s);
    tmp[s.len()] = unit;
    &tmp[..=s.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_and_numbers_format_like_the_helpers() {
        let now = 1_000_000_000;
        for d in [0, 1, 59, 60, 61, 3599, 3600, 86399, 86400, 10 * 86400, -5] {
            let mut a = [0u8; 21];
            assert_eq!(
                age_bytes(now - d, now, &mut a),
                age(now - d, now).as_bytes(),
                "{d}"
            );
        }
        for n in [0u64, 7, 10, 4096, u64::MAX] {
            let mut t = [0u8; 20];
            assert_eq!(decimal(n, &mut t), n.to_string().as_bytes());
        }
    }
}
