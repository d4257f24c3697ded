//! The flags that bound what a replay may do and for how long: `--sandbox`
//! and `--timeout`, shared by replay, check, bisect and diff. The policy
//! itself is `rrstore_replay::sandbox`.

use std::time::Duration;

use rrstore_replay::backend::BackendError;
use rrstore_replay::sandbox::{self, Mode};

/// Kernel time limit when neither `--timeout` nor the configuration sets one.
pub const DEFAULT_TIMEOUT_S: f64 = 600.0;

#[derive(clap::Args, Clone, Debug, Default)]
pub struct ConfineArgs {
    /// Kill a kernel after SECS seconds (a regression for check), or
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

fn parse_timeout(s: &str) -> Result<Timeout, String> {
    if s == "none" {
        return Ok(Timeout::None);
    }
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(Timeout::Secs(v)),
        _ => Err(format!(
            "expected a positive number of seconds or `none`, got `{s}`"
        )),
    }
}

impl ConfineArgs {
    /// Set the process-wide sandbox mode (refusing under `strict` what this
    /// machine cannot confine; warning under `off`) and return the kernel
    /// time limit.
    pub fn apply(&self) -> anyhow::Result<Option<Duration>> {
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
        sandbox::set_mode(mode);
        Ok(match self.timeout {
            Some(Timeout::Secs(s)) => Some(Duration::from_secs_f64(s)),
            Some(Timeout::None) => None,
            None => Some(Duration::from_secs_f64(DEFAULT_TIMEOUT_S)),
        })
    }
}

/// What the replay's runners printed, and how the last one was confined:
/// shown apart from rrstore's own lines, after the runner ended.
pub struct KernelOutput {
    bytes: Vec<u8>,
    dropped: u64,
    applied: Option<sandbox::Mechanisms>,
}

/// The prefix of each line a runner printed.
pub const PREFIX: &str = "  kernel| ";

impl KernelOutput {
    pub fn take() -> KernelOutput {
        let (bytes, dropped) = sandbox::output::take();
        KernelOutput {
            bytes,
            dropped,
            applied: sandbox::applied(),
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
        print!("{}", sandbox::output::prefixed(&self.bytes, PREFIX));
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
                    "mode": sandbox::mode().as_str(),
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
        for bad in ["0", "-1", "inf", "NaN", "soon"] {
            assert!(parse_timeout(bad).is_err(), "{bad}");
        }
    }
}
