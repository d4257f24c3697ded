//! `rrstore bisect ID|--label GLOB --passes [--image IR] [--toolchain X |
//! --toolchains A B ...] [--cflags ...] [--slower PCT]`: the first
//! optimization pass whose run changes the kernel's output (LLVM's
//! `-opt-bisect-limit`), after the first toolchain of a list that does;
//! printed with each step; exit 0 once the search completes, culprit or
//! not. Logic: rrstore_replay::regress::passes.

use std::process::ExitCode;

use anyhow::Context;
use rrstore_replay::regress::passes::{
    bisect_passes, bisect_passes_all, PassBisectOptions, PassBisectReport, PassStep,
};
use rrstore_report::shown::Shown;

use super::bisect::Args;
use super::image::resolve_image;
use super::storeutil;
use crate::errors::regress_error as regress_err;
use crate::Globals;

fn print_step(s: &PassStep) {
    println!(
        "  step {}: limit {} image {}{} -> {}",
        s.step,
        s.limit,
        &s.image[..12],
        if s.compile_cached { " (cached)" } else { "" },
        super::bisect::outcome(s.good, &s.run),
    );
}

fn print_report(r: &PassBisectReport) {
    for t in &r.toolchain_steps {
        println!(
            "  toolchain {} {} ({}) -> {}",
            t.index,
            Shown(&t.toolchain),
            Shown(&t.compiler_version),
            if t.good { "good" } else { "BAD" }
        );
    }
    if !r.toolchain_steps.is_empty() {
        match &r.toolchain {
            Some(t) => println!("  first toolchain that changes the output: {}", Shown(t)),
            None => println!("  no toolchain of the list changed the output"),
        }
    }
    match &r.culprit {
        Some(p) if p.number == 0 => println!("  culprit: {}", Shown(&p.name)),
        Some(p) => println!(
            "  culprit: pass {} {} on {} is the first to change the output (image {} vs {} before it)",
            p.number,
            Shown(&p.name),
            Shown(&p.on),
            r.culprit_image.as_deref().map_or("", |h| &h[..12]),
            r.last_good_image.as_deref().map_or("", |h| &h[..12]),
        ),
        None if r.toolchain_steps.is_empty() || r.toolchain.is_some() => {
            println!("  no pass changed the output")
        }
        None => {}
    }
    // No toolchain of the list changed the output: no passes were
    // counted, by no compiler; say which toolchains were compared instead.
    let what = if !r.toolchain_steps.is_empty() && r.toolchain.is_none() {
        let tried: Vec<String> = r
            .toolchain_steps
            .iter()
            .map(|t| Shown(&t.toolchain).to_string())
            .collect();
        format!(
            "no passes bisected: {} toolchain(s) tried ({}), none changed the output",
            tried.len(),
            tried.join(", ")
        )
    } else {
        format!("{} passes by {}", r.passes, Shown(&r.compiler_version))
    };
    println!(
        "  {what}; {} compile(s) ({} from the cache), {} replay(s), {} from the history",
        r.compile_steps,
        r.compile_steps - r.compiles,
        r.replays,
        r.cached
    );
}

pub fn run(args: &Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let mut store = storeutil::open(globals)?;
    let ids = args.select.ids(&store, "bisect")?;
    let ir = match &args.image {
        Some(spec) => Some(resolve_image(&mut store, spec)?.set),
        None => None,
    };
    let mut run = args.run.options(true, globals)?;
    // Every step but the reference differs from the recorded output by
    // design (another compile of the kernel): confirming each difference
    // would triple the replays. `--confirm N` still asks for it.
    if args.run.replay.run.confirm.is_none() {
        run.replay.confirm = 0;
    }
    run.replay.repetitions = args
        .repetitions
        .unwrap_or(if args.slower.is_some() { 5 } else { 1 })
        .max(1);
    let opts = PassBisectOptions {
        ir,
        compile: run.replay.compile.clone(),
        toolchains: args.toolchains.clone(),
        slower_pct: args.slower,
        run,
    };
    let json = args.json;
    if let (Some(_), [id]) = (&args.select.recording, ids.as_slice()) {
        let id = *id;
        if !json {
            println!("bisect passes of {}", id.short());
        }
        let r = bisect_passes(&mut store, &id, &opts, &mut |s| {
            if !json {
                print_step(s);
            }
        })
        .map_err(regress_err)
        .with_context(|| format!("bisecting the passes of {}", id.short()))?;
        if json {
            // One recording or many, one shape (docs/json/bisect-passes.schema.json).
            let all = serde_json::json!({ "recordings": [r] });
            println!("{}", serde_json::to_string_pretty(&all)?);
        } else {
            print_report(&r);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let fleet = args.run.parallel.fleet()?;
    let mut reports = Vec::new();
    let mut first_err = None;
    bisect_passes_all(&mut store, &ids, &opts, &fleet, &mut |i, r| match r {
        Ok(r) => {
            if !json {
                println!("bisect passes of {} ({})", Shown(&r.kernel), ids[i].short());
                for s in &r.steps {
                    print_step(s);
                }
                print_report(&r);
            }
            reports.push(r);
        }
        Err(e) if first_err.is_none() => {
            first_err = Some(regress_err(e).context(format!("bisecting {}", ids[i].short())));
        }
        Err(_) => {}
    })
    .map_err(regress_err)?;
    if let Some(e) = first_err {
        return Err(e);
    }
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "recordings": reports }))?
        );
    }
    Ok(ExitCode::SUCCESS)
}
