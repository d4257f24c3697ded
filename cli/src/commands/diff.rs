//! `rrstore diff A B [--dtype f32|f64] [--part input|output] [--json]`: A and
//! B are recording ID prefixes or history rows (`h:12`). Prints descriptor
//! and argument differences, differing arena ranges mapped to argument
//! buffers, and with --dtype error statistics. Exit 1 (MISMATCH) when they
//! differ. Logic: rrstore_replay::regress::diff.

use rrstore_report::shown::Shown;
use std::process::ExitCode;

use rrstore_format::PartRole;
use rrstore_replay::regress::diff::{diff, DiffOptions};

use super::storeutil;
use crate::errors::regress_error as regress_err;
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// Recording ID prefix, or history row `h:ROW`.
    pub a: String,
    /// Recording ID prefix, or history row `h:ROW`.
    pub b: String,
    /// Also compare as f32/f64 elements: max abs/rel error, ULP distance.
    #[arg(long, value_enum)]
    pub dtype: Option<crate::flags::replay::DTypeArg>,
    /// Tolerances the element statistics count "out of bounds" against.
    #[arg(long, default_value_t = 0.0)]
    pub rtol: f64,
    #[arg(long, default_value_t = 0.0)]
    pub atol: f64,
    /// Which snapshot of a recording side to compare.
    #[arg(long, value_parser = ["input", "output"], default_value = "output")]
    pub part: String,
    /// Print the comparison as JSON (docs/json.md).
    #[arg(long)]
    pub json: bool,
    /// The replay settings of a side that is re-run ([`crate::flags::replay`]).
    #[command(flatten)]
    pub run: crate::flags::replay::RunFlags,
}

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let mut store = storeutil::open(globals)?;
    let opts = DiffOptions {
        part: if args.part == "input" {
            PartRole::Input
        } else {
            PartRole::Output
        },
        dtype: args.dtype.map(crate::flags::replay::DTypeArg::dtype),
        rtol: args.rtol,
        atol: args.atol,
        run: rrstore_replay::regress::run::RunOptions {
            replay: args.run.options(globals)?,
            use_cache: false,
            keep_output: true,
        },
    };
    let r = diff(&mut store, &args.a, &args.b, &opts).map_err(regress_err)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        // sandbox (hD): what the runners printed, apart from the comparison.
        super::confine::KernelOutput::after_runs(
            opts.run.replay.backends.sandbox,
            true,
            [&r.a.runner_output, &r.b.runner_output],
        )
        .print();
        for (name, s) in [("A", &r.a), ("B", &r.b)] {
            println!(
                "{name}: {} {} ({}), {} bytes, blake3 {}{}",
                Shown(&s.kernel),
                &s.recording[..12],
                s.what,
                s.len,
                &s.bytes_blake3[..12],
                s.rerun_row
                    .map(|row| format!(" (output not kept: re-ran it as row {row})"))
                    .unwrap_or_default()
            );
        }
        if r.fields.is_empty() {
            println!("descriptors: identical");
        } else {
            println!("descriptor differences:");
            let w = r.fields.iter().map(|f| f.field.len()).max().unwrap_or(0);
            for f in &r.fields {
                println!("  {:<w$}  {}  ->  {}", f.field, Shown(&f.a), Shown(&f.b));
            }
        }
        let base = r.a.arena_base;
        match &r.arena.mismatch {
            None if r.arena.identical => {
                println!("arena: identical ({} bytes)", r.arena.compared_bytes)
            }
            None => println!(
                "arena: the first {} bytes are identical; the sizes differ",
                r.arena.compared_bytes
            ),
            Some(m) => {
                println!("arena ({} bytes compared):", r.arena.compared_bytes);
                for line in m.describe(base) {
                    println!("  {line}");
                }
            }
        }
        if let Some(t) = &r.arena.tolerance {
            println!(
                "  {:?}: {} of {} elements differ ({} beyond rtol {} atol {}); max abs error {:e}, max rel error {:e}, max ULP {}, NaN mismatches {}",
                t.dtype,
                t.differing,
                t.elements,
                t.out_of_bounds,
                args.rtol,
                args.atol,
                t.max_abs_error,
                t.max_rel_error,
                t.max_ulp,
                t.nan_mismatches
            );
        }
        println!(
            "{}",
            if r.identical {
                "IDENTICAL"
            } else {
                "DIFFERENT"
            }
        );
    }
    Ok(if r.identical {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(crate::exit::MISMATCH)
    })
}
