//! `rrstore bisect ID --passes [--image IR] [--toolchain X] [--cflags ...]`:
//! the first optimization pass whose run changes the kernel's output
//! (LLVM's `-opt-bisect-limit`), printed with each step; exit 0 once the
//! search completes, culprit or not. Logic:
//! rrstore_replay::regress::passes.

use std::process::ExitCode;

use anyhow::Context;
use rrstore_replay::regress::passes::{bisect_passes, PassBisectOptions, PassStep};
use rrstore_report::shown::Shown;

use super::bisect::Args;
use super::image::resolve_image;
use super::storeutil;
use crate::errors::regress_error as regress_err;
use crate::Globals;

fn print_step(s: &PassStep) {
    println!(
        "  step {}: limit {} image {}{} -> {} {}",
        s.step,
        s.limit,
        &s.image[..12],
        if s.compile_cached { " (cached)" } else { "" },
        if s.good {
            crate::color::paint(crate::color::Tone::Good, "good")
        } else {
            crate::color::paint(crate::color::Tone::Bad, "BAD")
        },
        match &s.run.output {
            Some(h) if s.good => format!("output {}", &rrstore_format::id::hex(h)[..12]),
            Some(h) => format!("output {} differs", &rrstore_format::id::hex(h)[..12]),
            None => s.run.verdict.clone(),
        },
    );
}

pub fn run(args: &Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let mut store = storeutil::open(globals)?;
    let Some(prefix) = &args.recording else {
        anyhow::bail!(crate::exit::UsageError(
            "bisect --passes takes one recording ID".into()
        ));
    };
    let id = store.resolve(prefix).context("the recording to bisect")?;
    let ir = match &args.image {
        Some(spec) => {
            let set = resolve_image(&mut store, spec)?.set;
            let rec = store.recording(&id)?;
            Some(set.pick_ir(&rec).map_err(regress_err)?.bytes().to_vec())
        }
        None => None,
    };
    let run = args.run.options(true, globals)?;
    let opts = PassBisectOptions {
        ir,
        compile: run.replay.compile.clone(),
        run,
    };
    let json = args.json;
    let r = bisect_passes(&mut store, &id, &opts, &mut |s| {
        if !json {
            print_step(s);
        }
    })
    .map_err(regress_err)
    .with_context(|| format!("bisecting the passes of {}", id.short()))?;
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "bisect passes of {} ({}): {} passes by {}",
        Shown(&r.kernel),
        id.short(),
        r.passes,
        Shown(&r.compiler_version)
    );
    match &r.culprit {
        Some(p) => println!(
            "  culprit: pass {} {} on {} is the first to change the output (image {} vs {} before it)",
            p.number,
            Shown(&p.name),
            Shown(&p.on),
            r.culprit_image.as_deref().map_or("", |h| &h[..12]),
            r.last_good_image.as_deref().map_or("", |h| &h[..12]),
        ),
        None => println!("  no pass changed the output"),
    }
    println!(
        "  {} compile(s) ({} from the cache), {} replay(s), {} from the history",
        r.compile_steps,
        r.compile_steps - r.compiles,
        r.replays,
        r.cached
    );
    Ok(ExitCode::SUCCESS)
}
