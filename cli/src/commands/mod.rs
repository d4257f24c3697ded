//! One module per subcommand. Each has `Args` (clap) and
//! `run(args, globals) -> anyhow::Result<ExitCode>`.

pub mod devices;
pub mod inspect;
pub mod pack;
pub mod unpack;
