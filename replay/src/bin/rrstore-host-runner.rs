//! Stand-alone host runner for the replay crate's own tests (the `rrstore`
//! binary serves the same through its hidden `__host-runner` subcommand).

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    std::process::exit(rrstore_replay::backend::host::runner_main(&args));
}
