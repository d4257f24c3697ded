//! `rrstore inspect`.

use std::process::ExitCode;

use crate::Globals;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args, _globals: &Globals) -> anyhow::Result<ExitCode> {
    anyhow::bail!("`rrstore inspect` is being built")
}
