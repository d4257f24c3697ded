//! One module per subcommand. Each has `Args` (clap) and
//! `run(args, globals) -> anyhow::Result<ExitCode>`.

pub mod completions;
pub mod devices;
pub mod inspect;
pub mod man;
pub mod pack;
pub mod placement;
pub mod unpack;
// Store commands.
pub mod export;
pub mod gc;
pub mod import;
pub mod ls;
pub mod record;
pub mod repair;
pub mod rm;
pub mod show;
pub mod stats;
pub mod storeutil;
pub mod tag;
pub mod verify;
// Remote commands.
pub mod pull;
pub mod push;
pub mod remote;
// Replay commands.
pub mod history;
pub mod replay;
pub mod report;
// Regression commands.
pub mod bisect;
pub mod changes;
pub mod check;
pub mod ciout;
pub mod diff;
pub mod image;
