//! `rrstore tag ID KEY=VALUE... [--remove KEY]`.

use std::process::ExitCode;

use rrstore_report::shown::Shown;
use rrstore_store::recordings::parse_tag;

use super::storeutil;
use crate::exit::UsageError;
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// Recording ID or unique prefix (4+ hex digits).
    pub id: String,
    /// Tags to set.
    #[arg(value_name = "KEY=VALUE")]
    pub tags: Vec<String>,
    /// Keys to remove (repeatable).
    #[arg(long = "remove", value_name = "KEY")]
    pub remove: Vec<String>,
    /// Print the resulting tags as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    // A malformed KEY=VALUE is a bad command line (exit 2), found before
    // the store is opened.
    let set = args
        .tags
        .iter()
        .map(|t| parse_tag(t).map_err(|e| UsageError(e.to_string())))
        .collect::<Result<Vec<_>, _>>()?;
    let mut store = storeutil::open(globals)?;
    let id = store.resolve(&args.id)?;
    // Committed: a later failure to refresh the recovery metadata is a
    // warning, not a failed command (the tags are set; spec/STORE.md,
    // "Recovery metadata").
    if let Some(e) = store.tag(&id, &set, &args.remove)? {
        eprintln!(
            "warning: the tags are saved, but the recording's recovery metadata could not be \
             refreshed ({}): until it is, `rrstore repair` would restore the old tags; free \
             space and run `rrstore tag {}` to refresh it",
            Shown(e.to_string()),
            &id.to_hex()[..12]
        );
    }
    let tags = store.tags(&id)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&tags)?);
    } else {
        for (k, v) in tags {
            println!("{}={}", Shown(k), Shown(v));
        }
    }
    Ok(ExitCode::SUCCESS)
}
