//! The `rrstore` command line: parses arguments, calls the libraries, prints.
//! Every subcommand lives in `commands/<name>.rs`; exit codes in `exit.rs`.

mod commands;
mod exit;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Store, share and replay LLVM OpenMP offload kernel recordings.
#[derive(Parser)]
#[command(name = "rrstore", version, about, long_about = None)]
pub struct Cli {
    /// Store directory (default: $RRSTORE_DIR, else ~/.local/share/rrstore).
    #[arg(long, global = true, value_name = "DIR")]
    pub store: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Pack an LLVM recording into a single .rra archive.
    Pack(commands::pack::Args),
    /// Unpack a .rra archive into LLVM recording files.
    Unpack(commands::unpack::Args),
    /// Describe a recording (.rra archive or LLVM .json descriptor).
    Inspect(commands::inspect::Args),
    /// List the replay backends usable here (host, CUDA, HIP) and their devices.
    Devices(commands::devices::Args),
}

/// Options every command can read.
pub struct Globals {
    pub store: Option<PathBuf>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let globals = Globals { store: cli.store };
    let result = match cli.command {
        Command::Pack(a) => commands::pack::run(a, &globals),
        Command::Unpack(a) => commands::unpack::run(a, &globals),
        Command::Inspect(a) => commands::inspect::run(a, &globals),
        Command::Devices(a) => commands::devices::run(a, &globals),
    };
    match result {
        Ok(code) => code,
        Err(err) => exit::report(&err),
    }
}
