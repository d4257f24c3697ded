//! The flags that bound what a replay may do and for how long: `--sandbox`
//! and `--timeout`, shared by replay, check, bisect and diff. The policy
//! itself is `rrstore_replay::sandbox`.

use std::time::Duration;

use rrstore_replay::backend::BackendError;
use rrstore_replay::sandbox::output::RunnerOutput;
use rrstore_replay::sandbox::{self, Mode};

/// Kernel time limit when neither `--timeout` nor the configuration sets one.
pub const DEFAULT_TIMEOUT_S: f64 = 600.0;

#[derive(clap::Args, Clone, Debug, Default)]
pub struct ConfineArgs {
    /// Kill a kernel after SECS seconds (at least 0.001; a regression for check), or
    /// `none` for no limit [default: 600, or `timeout` in the configuration].
    #[arg(long, value_name = "SECS|none", value_parser = parse_timeout)]
    pub timeout: Option<Timeout>,
    /// Confine the process that runs the recording's code: auto (whatever
    /// this kernel supports), strict (refuse without Landlock and seccomp),
    /// off (debugging: the image runs with your rights) [default: auto, or
    /// `sandbox` in the configuration].
    #[arg(long, value_enum)]
    pub sandbox: Option<SandboxArg>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Timeout {
    Secs(f64),
    None,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxArg {
    #[default]
    Auto,
    Strict,
    Off,
}

/// The shortest `--timeout`: the runners' waits count in milliseconds at
/// best (a socket read timeout that rounds to zero would mean "no limit"),
/// so a shorter limit is refused rather than silently not applied.
pub const MIN_TIMEOUT_S: f64 = 0.001;

fn parse_timeout(s: &str) -> Result<Timeout, String> {
    if s == "none" {
        return Ok(Timeout::None);
    }
    match s.parse::<f64>() {
        Ok(v) if valid_timeout(v) => Ok(Timeout::Secs(v)),
        Ok(v) if v >= MIN_TIMEOUT_S && v.is_finite() => Err(format!(
            "`{s}` seconds is longer than the longest limit a replay can keep ({} s): give a shorter one, or `none` for no limit",
            Duration::MAX.as_secs()
        )),
        Ok(v) if v > 0.0 && v.is_finite() => Err(format!(
            "`{s}` is shorter than the shortest limit a replay can keep, {MIN_TIMEOUT_S} s (1 ms): give at least 0.001"
        )),
        _ => Err(format!(
            "expected a positive number of seconds or `none`, got `{s}`"
        )),
    }
}

/// Whether `secs` is a timeout `--timeout` would accept (the configuration
/// file's `timeout` is held to the same rule).
/// `Duration` holds at most 2^64 s: a longer one is refused here, so that
/// no later conversion can panic.
pub fn valid_timeout(secs: f64) -> bool {
    secs.is_finite() && secs >= MIN_TIMEOUT_S && Duration::try_from_secs_f64(secs).is_ok()
}

/// What the flags settled: the kernel time limit and the sandbox mode,
/// which go into the replay's options (no process-wide setting: each
/// replay's backend configuration carries its mode).
#[derive(Clone, Copy, Debug)]
pub struct Confinement {
    pub timeout: Option<Duration>,
    pub sandbox: Mode,
}

impl ConfineArgs {
    /// The sandbox mode (refusing under `strict` what this machine cannot
    /// confine; warning under `off`) and the kernel time limit.
    pub fn apply(&self) -> anyhow::Result<Confinement> {
        let mode = match self.sandbox.unwrap_or_default() {
            SandboxArg::Auto => Mode::Auto,
            SandboxArg::Strict => Mode::Strict,
            SandboxArg::Off => Mode::Off,
        };
        sandbox::require(mode).map_err(|e| {
            BackendError::Unavailable(format!(
                "{e}; replay on a kernel with Landlock and seccomp, or give --sandbox auto to replay with what there is"
            ))
        })?;
        if mode == Mode::Off {
            eprintln!(
                "warning: --sandbox off: the recording's code runs with your rights (files, network, environment)"
            );
        }
        Ok(Confinement {
            timeout: match self.timeout {
                // Checked by valid_timeout when parsed; never a panic.
                Some(Timeout::Secs(s)) => {
                    Some(Duration::try_from_secs_f64(s).unwrap_or(Duration::MAX))
                }
                Some(Timeout::None) => None,
                None => Some(Duration::from_secs(DEFAULT_TIMEOUT_S as u64)),
            },
            sandbox: mode,
        })
    }
}

/// What the replay's runners printed, and how they were confined: shown
/// apart from rrstore's own lines, after the runner ended.
pub struct KernelOutput {
    bytes: Vec<u8>,
    dropped: u64,
    mode: Mode,
    applied: Option<sandbox::Mechanisms>,
}

/// The prefix of each line a runner printed.
pub const PREFIX: &str = "  kernel| ";

impl KernelOutput {
    /// A replay's runner output (its report's), and `applied`: how the
    /// replay's runner confined itself under `mode` (its report), or, for
    /// commands that ran many replays, None: then what runners under
    /// `mode` apply on this machine ([`sandbox::Probe`]; a runner's report
    /// can only narrow it).
    pub fn new(
        output: &RunnerOutput,
        mode: Mode,
        applied: Option<sandbox::Mechanisms>,
    ) -> KernelOutput {
        KernelOutput {
            bytes: output.bytes.clone(),
            dropped: output.dropped,
            mode,
            applied,
        }
    }

    /// The output of a regression command's runs under `mode`, in order
    /// (`ran`: at least one replay ran; none: nothing to say).
    pub fn after_runs<'a>(
        mode: Mode,
        ran: bool,
        outputs: impl IntoIterator<Item = &'a RunnerOutput>,
    ) -> KernelOutput {
        let mut all = RunnerOutput::default();
        for o in outputs {
            all.append(o);
        }
        let expected = ran.then(|| sandbox::Probe::current().mechanisms(mode));
        KernelOutput::new(&all, mode, expected)
    }

    /// Print the output of each recording of a regression command (`check`)
    /// under a line naming it (`heading`), the recordings in order, those
    /// whose runners printed nothing left out: lanes that ran at once
    /// (`--jobs`) never mix their lines.
    pub fn print_by_recording(
        mode: Mode,
        ran: bool,
        recordings: impl IntoIterator<Item = (String, RunnerOutput)>,
    ) {
        // The confinement once, for all of them.
        KernelOutput::after_runs(mode, ran, []).print();
        for (heading, out) in recordings {
            if out.is_empty() {
                continue;
            }
            println!("kernel output of {heading}:");
            KernelOutput::new(&out, mode, None).print();
        }
    }

    /// Print the runner's lines, prefixed, and a partial confinement.
    pub fn print(&self) {
        if let Some(m) = self.applied.filter(|m| m.0 != 0 && !m.missing().is_empty()) {
            println!(
                "  sandbox partial: {} (missing {})",
                m.names().join(", "),
                m.missing().join(", ")
            );
        }
        // Escaped as every other untrusted text (rrstore_report::shown).
        let text = String::from_utf8_lossy(&self.bytes);
        print!("{}", rrstore_report::shown::lines(&text, PREFIX, PREFIX));
        if self.dropped > 0 {
            println!("{PREFIX}({} more bytes of output not shown)", self.dropped);
        }
    }

    /// Add `kernel_output` and `sandbox` to a JSON report.
    pub fn insert_json(&self, o: &mut serde_json::Map<String, serde_json::Value>) {
        o.insert(
            "kernel_output".into(),
            String::from_utf8_lossy(&self.bytes).into_owned().into(),
        );
        if let Some(m) = self.applied {
            o.insert(
                "sandbox".into(),
                serde_json::json!({
                    "mode": self.mode.as_str(),
                    "applied": m.names(),
                    "missing": if m.0 == 0 { Vec::new() } else { m.missing() },
                }),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_parse_as_seconds_or_none() {
        assert_eq!(parse_timeout("0.5"), Ok(Timeout::Secs(0.5)));
        assert_eq!(parse_timeout("none"), Ok(Timeout::None));
        assert_eq!(parse_timeout("0.001"), Ok(Timeout::Secs(0.001)));
        for bad in [
            "0",
            "-1",
            "inf",
            "NaN",
            "soon",
            "0.0009",
            "1e-10",
            "1e300",
            "18446744073709551616",
        ] {
            assert!(parse_timeout(bad).is_err(), "{bad}");
        }
    }
}
