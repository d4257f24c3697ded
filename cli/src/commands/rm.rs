//! `rrstore rm ID...`: remove recordings from the index (`gc` frees space);
//! `rrstore rm NAME:ID...`: from remote NAME (`remote prune` frees space).

use std::process::ExitCode;

use super::storeutil;
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// Recording IDs or unique prefixes (4+ hex digits); `NAME:ID` for a
    /// recording on remote NAME.
    #[arg(required = true)]
    pub ids: Vec<String>,
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    if args.ids.iter().any(|a| a.contains(':')) {
        let store = storeutil::open(globals)?;
        return super::remote::remove_remote(&store, &args.ids);
    }
    let mut store = storeutil::open(globals)?;
    let ids = storeutil::resolve_all(&store, &args.ids)?;
    let n = store.remove(&ids)?;
    for id in &ids {
        println!("removed {}", id.short());
    }
    eprintln!("{n} recording(s) removed; run `rrstore gc` to free their space");
    Ok(ExitCode::SUCCESS)
}
