//! `rrstore devices`: the replay backends usable on this machine and their
//! devices (ordinal for `--device`, name, UUID, memory; host CPU: its
//! cores; CUDA: compute capability, driver version; HIP: gfx target,
//! runtime version). A machine without a GPU
//! or driver is a normal answer: it says so and exits 0. Also how replays
//! are confined on this kernel (`rrstore_replay::sandbox`), and what this
//! machine does with a fresh arena's memory (`host_memory`).

use std::process::ExitCode;

use rrstore_replay::backend::devices::{self, BackendStatus};
use rrstore_replay::backend::BackendKind;

use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// Print JSON: an array of {backend, available, runtime?, reason?,
    /// devices: [{index, name, target, uuid?, compute_capability?, memory_bytes?, cores?}]}.
    #[arg(long)]
    pub json: bool,
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
}

fn render_text(all: &[BackendStatus]) -> String {
    let mut out = String::new();
    for b in all {
        if b.available {
            let rt = b.runtime.as_deref().unwrap_or("");
            out.push_str(&format!("{:<5} available  {rt}\n", b.backend));
            for d in &b.devices {
                let mut extra = Vec::new();
                if let Some(cc) = &d.compute_capability {
                    extra.push(format!("compute capability {cc}"));
                }
                if let Some(m) = d.memory_bytes {
                    extra.push(gib(m));
                }
                if let Some(c) = d.cores {
                    extra.push(format!("{c} cores"));
                }
                if let Some(u) = &d.uuid {
                    extra.push(format!("uuid {u}"));
                }
                out.push_str(&format!(
                    "  [{}] {}  target {}  {}\n",
                    d.index,
                    d.name,
                    d.target,
                    extra.join(", ")
                ));
            }
        } else {
            let why = b.reason.as_deref().unwrap_or("not usable here");
            out.push_str(&format!("{:<5} not available: {why}\n", b.backend));
        }
    }
    let gpu = |b: &BackendStatus| BackendKind::named(b.backend).is_some_and(BackendKind::is_gpu);
    if !all.iter().any(|b| gpu(b) && b.available) {
        out.push_str(
            "No GPU backend is usable on this machine; replays run on the host backend.\n",
        );
    }
    out
}

/// How runners are confined here, for the text and each JSON entry.
fn sandbox_text() -> String {
    use rrstore_replay::sandbox::{Mode, Probe};
    let probe = Probe::current();
    let m = probe.mechanisms(Mode::Auto);
    let verdict = if m.missing().is_empty() {
        "replays run fully confined".to_string()
    } else {
        format!(
            "replays run without {} (--sandbox strict refuses)",
            m.missing().join(", ")
        )
    };
    format!("{}: {verdict}", probe.describe())
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let all = devices::all();
    let sandbox = sandbox_text();
    let memory = crate::flags::env::host_memory();
    let limit = globals.replay.arena_cache;
    let cache = crate::flags::replay::arena_cache_setting(limit).usage();
    if args.json {
        let mut v = serde_json::to_value(&all)?;
        for b in v.as_array_mut().into_iter().flatten() {
            if let Some(o) = b.as_object_mut() {
                o.insert("sandbox".into(), sandbox.clone().into());
                if o.get("backend").and_then(|b| b.as_str()) == Some(BackendKind::Host.as_str()) {
                    o.insert("memory".into(), serde_json::to_value(memory)?);
                    let c = super::host_memory::cache_json(limit, &cache);
                    o.insert("arena_cache".into(), c);
                }
            }
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", render_text(&all));
        println!("sandbox: {sandbox}");
        println!("memory: {}", super::host_memory::describe(&memory));
        if let Some(line) = super::host_memory::describe_cache(limit, &cache) {
            println!("arena cache: {line}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
