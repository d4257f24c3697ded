//! `rrstore show ID`: what `inspect` shows, plus the stored size and the
//! other recordings that share chunks with it, and who signed it (the
//! signatures the store kept when it pulled or signed the recording).

use std::process::ExitCode;

use rrstore_format::image::global_refs;
use rrstore_format::inspect::{describe, mark_globals, render_json, render_text};

use rrstore_report::shown::Shown;
use rrstore_store::signatures::Kept;

use super::storeutil::{self, bytes};
use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// Recording ID or unique prefix (4+ hex digits).
    pub id: String,
    /// Print inspect's JSON plus a `store` object (docs/json.md).
    #[arg(long)]
    pub json: bool,
    /// Also list the pointers stored in the input snapshot (8-aligned words
    /// pointing into the arena: what a relocated replay rebases).
    #[arg(long)]
    pub pointers: bool,
}

/// Stored pointers listed by `--pointers` (all are counted).
const POINTERS_LISTED: usize = 10_000;

pub fn run(args: Args, globals: &Globals) -> anyhow::Result<ExitCode> {
    let store = storeutil::open(globals)?;
    let id = store.resolve(&args.id)?;
    let rec = store.recording(&id)?;
    let summary = store.summary(&id)?;
    let sharing = store.sharing(&id)?;
    let mut d = describe(&rec, &[]);
    if let Ok(mut parts) = store.parts_of(&id) {
        let image = global_refs::read_image(&rec, &mut parts);
        mark_globals(&mut d, &rec, &image);
    }
    let rec_kernel = d.kernel.clone();
    let compiled = store.compiled_images(id)?;
    let mut signers = Vec::new();
    for k in store.signatures(&id)? {
        match k {
            Kept::Valid(s) => signers.push(s),
            Kept::Invalid { path, reason } => eprintln!(
                "warning: {} is not a valid signature of this recording ({}): it was changed \
                 on disk; remove it, or pull the recording's signatures again",
                Shown(path.to_string_lossy()),
                Shown(&reason)
            ),
        }
    }
    let pointers = if args.pointers {
        let mut src = rrstore_replay::ReplaySource::stored(&store, &args.id)
            .map_err(crate::errors::replay_error)?;
        Some(
            rrstore_replay::placement::pointers::scan_source(&mut src, POINTERS_LISTED)
                .map_err(crate::errors::replay_error)?,
        )
    } else {
        None
    };
    if args.json {
        let mut v: serde_json::Value = serde_json::from_str(&render_json(&d))?;
        if let Some(obj) = v.as_object_mut() {
            obj.insert(
                "store".into(),
                serde_json::json!({
                    "label": summary.label,
                    "source": summary.source,
                    "imported_at": summary.imported_at,
                    "tags": summary.tags,
                    "unique_bytes": sharing.unique_bytes,
                    "stored_bytes": sharing.stored_bytes,
                    "exclusive_stored_bytes": sharing.exclusive_stored_bytes,
                    "shared_with": sharing.shared_with,
                    "signatures": signers
                        .iter()
                        .map(|s| serde_json::json!({
                            "key_id": s.public.key_id(),
                            "public_key": s.public.to_string(),
                            "name": s.name,
                        }))
                        .collect::<Vec<_>>(),
                    "compiled_images": compiled,
                }),
            );
            if let Some(p) = &pointers {
                obj.insert("pointers".into(), serde_json::to_value(p)?);
            }
        }
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(ExitCode::SUCCESS);
    }
    let mut d = super::inspect::for_people(d);
    let shown = rrstore_report::names::display(&rec_kernel).into_owned();
    if shown != d.kernel {
        // The raw name is what --kernel globs and JSON use.
        d.kernel = format!("{shown} (raw: {})", d.kernel);
    }
    print!("{}", render_text(&d));
    println!("store:");
    println!("  label           {}", Shown(&summary.label));
    println!("  source          {}", Shown(&summary.source));
    println!(
        "  imported at     {} UTC ({} ago)",
        super::storeutil::utc(summary.imported_at),
        super::storeutil::age(summary.imported_at, rrstore_store::now_unix())
    );
    for (k, v) in &summary.tags {
        println!("  tag             {}={}", Shown(k), Shown(v));
    }
    for s in &signers {
        let name = if s.name.is_empty() {
            String::new()
        } else {
            format!("{} ", Shown(&s.name))
        };
        println!(
            "  signed by       {name}(key id {}, {})",
            s.public.key_id(),
            s.public
        );
    }
    for c in &compiled {
        // Each image its replays compiled from IR, with its provenance.
        println!(
            "  compiled image  {} ({} replay(s)): {}",
            &c.image[..12.min(c.image.len())],
            c.replays,
            Shown(c.how.summary())
        );
    }
    println!(
        "  stored          {} for {} of distinct chunks ({} not shared with other recordings)",
        bytes(sharing.stored_bytes),
        bytes(sharing.unique_bytes),
        bytes(sharing.exclusive_stored_bytes)
    );
    if sharing.shared_with.is_empty() {
        println!("  shares chunks with no other recording");
    } else {
        println!("  shares chunks with:");
        // One table: columns padded to the widest cell, sizes right-aligned.
        let rows: Vec<[String; 4]> = sharing
            .shared_with
            .iter()
            .map(|s| {
                [
                    s.id.chars().take(12).collect(),
                    rrstore_report::names::display(&s.kernel).into_owned(),
                    bytes(s.shared_bytes),
                    Shown(&s.label).to_string(),
                ]
            })
            .collect();
        let width = |c: usize| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0);
        let (kw, bw) = (width(1), width(2));
        for [id, kernel, size, label] in &rows {
            let line = format!("    {id}  {kernel:<kw$}  {size:>bw$}  {label}");
            println!("{}", line.trim_end());
        }
    }
    if let Some(p) = &pointers {
        print_pointers(p);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_pointers(p: &rrstore_replay::placement::pointers::PointerScan) {
    let arg = |a: Option<usize>| a.map_or("-".to_string(), |i| format!("arg {i}"));
    println!(
        "stored pointers: {} (8-aligned words of the input pointing into the arena)",
        p.total
    );
    if !p.pointers.is_empty() {
        println!("  offset      in        -> target      in");
    }
    for s in &p.pointers {
        let line = format!(
            "  {:<10}  {:<8}  -> {:<10}  {}",
            format!("{:#x}", s.offset),
            arg(s.arg),
            format!("{:#x}", s.target),
            arg(s.target_arg)
        );
        println!("{}", line.trim_end());
    }
    if p.total > p.pointers.len() as u64 {
        println!("  ({} more not listed)", p.total - p.pointers.len() as u64);
    }
    if !p.globals.is_empty() {
        println!("stored addresses of device globals: (a replay rebases them to its own copy)");
        for g in &p.globals {
            let line = format!(
                "  {:<10}  {:<8}  -> {}",
                format!("{:#x}", g.offset),
                arg(g.arg),
                Shown(g.global.to_string())
            );
            println!("{}", line.trim_end());
        }
    }
}
