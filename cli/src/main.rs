//! The `rrstore` command line: parses arguments, calls the libraries, prints.
//! Every subcommand lives in `commands/<name>.rs`; exit codes in `exit.rs`.

mod color;
mod commands;
mod config;
mod errors;
mod exit;
mod flags;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// `rrstore --version`: the version and the commit it was built from.
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("RRSTORE_COMMIT"),
    ")"
);

/// Store, share and replay LLVM OpenMP offload kernel recordings.
#[derive(Parser)]
#[command(name = "rrstore", version = VERSION, about, long_about = None)]
pub struct Cli {
    /// Store directory (default: $RRSTORE_DIR, else $XDG_DATA_HOME/rrstore, else
    /// ~/.local/share/rrstore).
    #[arg(long, global = true, value_name = "DIR")]
    pub store: Option<PathBuf>,
    /// Colour verdicts: auto (on a terminal, unless NO_COLOR is set), always, never.
    #[arg(
        long,
        global = true,
        value_enum,
        default_value = "auto",
        value_name = "WHEN"
    )]
    pub color: color::ColorChoice,
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
    /// Import LLVM recording directories and .rra archives into the store.
    Import(commands::import::Args),
    /// Run a program with LLVM's record environment and import what it wrote.
    Record(commands::record::Args),
    /// List stored recordings.
    Ls(commands::ls::Args),
    /// Describe a stored recording, its stored size and chunk sharing.
    Show(commands::show::Args),
    /// Write a stored recording as LLVM files or a .rra archive.
    Export(commands::export::Args),
    /// Remove recordings from the store (then `gc` frees their space).
    Rm(commands::rm::Args),
    /// Set or remove tags on a stored recording.
    Tag(commands::tag::Args),
    /// Check the store's consistency (--full: re-hash every chunk).
    Verify(commands::verify::Args),
    /// Free space no recording references.
    Gc(commands::gc::Args),
    /// Rebuild the store's index from its pack files (after it was lost or damaged).
    Repair(commands::repair::Args),
    /// Store size, dedup and compression ratios.
    Stats(commands::stats::Args),
    /// Replay a recording (store ID, .rra or LLVM .json) and verify its output.
    Replay(commands::replay::Args),
    /// List the replay history (all recordings, or one).
    History(commands::history::Args),
    /// Store device images (content-addressed) and list them.
    Image(commands::image::Args),
    /// Replay every matching recording (optionally with another image) and report regressions.
    Check(commands::check::Args),
    /// Compare two recordings or two kept replay outputs (history rows h:N).
    Diff(commands::diff::Args),
    /// Find the first image in an ordered list that changes a kernel's output.
    Bisect(commands::bisect::Args),
    /// Find the fastest verified launch configuration and compile variant of a kernel.
    Tune(commands::tune::Args),
    /// Manage remotes (S3-compatible buckets, file:// directories).
    Remote(commands::remote::Args),
    /// Send recordings to a remote (only what it lacks).
    Push(commands::push::Args),
    /// Bring recordings from a remote (only the chunks this store lacks).
    Pull(commands::pull::Args),
    /// Make and show the ed25519 keys that sign recordings (push --sign).
    Key(commands::key::Args),
    /// Write an HTML report with charts of the history and the store.
    Report(commands::report::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(commands::completions::Args),
    /// Write man pages for rrstore and every subcommand.
    Man(commands::man::Args),
}

/// Options every command can read.
pub struct Globals {
    pub store: Option<PathBuf>,
    /// The configuration file's default remote (push, pull, `ls :`).
    pub remote: Option<String>,
    /// What the configuration file sets for replays (`timeout`,
    /// `sandbox`, `arena_cache`), merged with the replay flags.
    pub replay: flags::replay::Configured,
    /// What the environment sets for the stores opened by default
    /// (`RRSTORE_DIR`, `RRSTORE_MACHINE`: [`flags::env::store_settings`]).
    pub store_settings: rrstore_store::StoreSettings,
}

fn main() -> ExitCode {
    // The host replay backend re-executes this binary as its runner child
    // (hidden, not a clap subcommand).
    if let Some(code) = host_runner() {
        return code;
    }
    // Compiling an IR image runs the compiler through this binary, which
    // confines itself first (rrstore_replay::compile::confine).
    if let Some(code) = compile_confined() {
        return code;
    }
    let mut cli = Cli::parse();
    // The replay library's process-wide settings, before anything runs.
    rrstore_replay::settings::install(flags::env::process_settings());
    color::init(cli.color);
    let (remote, replay) = match config::load() {
        Ok(c) => {
            config::apply(&c, &mut cli);
            (c.remote.clone(), c.replay())
        }
        Err(e) => return exit::report(&e),
    };
    exit::quiet_broken_pipe_panics();
    let globals = Globals {
        store: cli.store,
        remote,
        replay,
        store_settings: flags::env::store_settings(),
    };
    let result = match cli.command {
        Command::Pack(a) => commands::pack::run(a, &globals),
        Command::Unpack(a) => commands::unpack::run(a, &globals),
        Command::Inspect(a) => commands::inspect::run(a, &globals),
        Command::Devices(a) => commands::devices::run(a, &globals),
        Command::Import(a) => commands::import::run(a, &globals),
        Command::Record(a) => commands::record::run(a, &globals),
        Command::Ls(a) => commands::ls::run(a, &globals),
        Command::Show(a) => commands::show::run(a, &globals),
        Command::Export(a) => commands::export::run(a, &globals),
        Command::Rm(a) => commands::rm::run(a, &globals),
        Command::Tag(a) => commands::tag::run(a, &globals),
        Command::Verify(a) => commands::verify::run(a, &globals),
        Command::Gc(a) => commands::gc::run(a, &globals),
        Command::Repair(a) => commands::repair::run(a, &globals),
        Command::Stats(a) => commands::stats::run(a, &globals),
        Command::Replay(a) => commands::replay::run(a, &globals),
        Command::History(a) => commands::history::run(a, &globals),
        Command::Image(a) => commands::image::run(a, &globals),
        Command::Check(a) => commands::check::run(a, &globals),
        Command::Diff(a) => commands::diff::run(a, &globals),
        Command::Bisect(a) => commands::bisect::run(a, &globals),
        Command::Tune(a) => commands::tune::run(a, &globals),
        Command::Remote(a) => commands::remote::run(a, &globals),
        Command::Push(a) => commands::push::run(a, &globals),
        Command::Pull(a) => commands::pull::run(a, &globals),
        Command::Key(a) => commands::key::run(a, &globals),
        Command::Report(a) => commands::report::run(a, &globals),
        Command::Completions(a) => commands::completions::run(a),
        Command::Man(a) => commands::man::run(a),
    };
    match result {
        Ok(code) => code,
        Err(err) if exit::is_broken_pipe(&err) => ExitCode::from(exit::BROKEN_PIPE),
        Err(err) => exit::report(&err),
    }
}

/// Confine and execute a compiler when started as `rrstore __compile-confined`.
fn compile_confined() -> Option<ExitCode> {
    use rrstore_replay::compile::confine::{confined_main, SUBCOMMAND};
    let mut args = std::env::args_os().skip(1);
    if args.next()? != SUBCOMMAND {
        return None;
    }
    let rest: Vec<std::ffi::OsString> = args.collect();
    Some(ExitCode::from(confined_main(&rest).clamp(0, 255) as u8))
}

/// Serve as the host backend's runner when started as `rrstore __host-runner`.
fn host_runner() -> Option<ExitCode> {
    use rrstore_replay::backend::host::{runner_main, RUNNER_SUBCOMMAND};
    let mut args = std::env::args_os().skip(1);
    if args.next()? != RUNNER_SUBCOMMAND {
        return None;
    }
    let rest: Vec<String> = args.map(|a| a.to_string_lossy().into_owned()).collect();
    Some(ExitCode::from(runner_main(&rest).clamp(0, 255) as u8))
}
