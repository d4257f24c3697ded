//! `rrstore inspect`: describe one recording, from a `.rra` archive or an
//! LLVM `.json` descriptor (any generation). The decoding lives in
//! `rrstore_format::inspect`; this only picks the reader and prints.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use rrstore_format::archive::{self, layout::MAGIC};
use rrstore_format::image::global_refs;
use rrstore_format::inspect::{describe, mark_globals, render_json, render_text, Description};
use rrstore_format::llvm;

use crate::Globals;

#[derive(clap::Args)]
pub struct Args {
    /// A `.rra` archive, an LLVM recording descriptor (`.json`), or a
    /// directory holding exactly one recording.
    #[arg(value_name = "X.rra|RECORDING.json")]
    pub path: PathBuf,
    /// Print the stable JSON form (docs/format-llvm.md) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Read part files that are symbolic links leading outside the
    /// recording's directory (refused otherwise).
    #[arg(long)]
    pub follow_symlinks: bool,
}

/// Whether the file starts with the archive magic.
fn is_archive(path: &Path) -> bool {
    let mut head = [0u8; 8];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok_and(|()| head == MAGIC)
        || path.extension().is_some_and(|e| e == archive::EXTENSION)
}

pub fn run(args: Args, _globals: &Globals) -> anyhow::Result<ExitCode> {
    let mut path = args.path.clone();
    if path.is_dir() {
        let found = llvm::find_recordings(&path)?;
        match found.as_slice() {
            [one] => path = one.clone(),
            [] => anyhow::bail!(
                "{}: no LLVM recording found in this directory",
                path.display()
            ),
            many => anyhow::bail!(
                "{}: holds {} recordings; name one descriptor, e.g. {}",
                path.display(),
                many.len(),
                many[0].display()
            ),
        }
    }
    let description = if is_archive(&path) {
        let reader = archive::Reader::open(&path)
            .with_context(|| format!("cannot inspect archive {}", path.display()))?;
        let mut reader = reader;
        let rec = reader.recording().clone();
        let image = global_refs::read_image(&rec, &mut reader);
        let mut d = describe(&rec, &[]);
        mark_globals(&mut d, &rec, &image);
        d
    } else {
        let loaded = llvm::load_links(&path, args.follow_symlinks).map_err(|e| {
            let hint = match e {
                rrstore_format::FormatError::LinkOutside { .. } => {
                    " (give --follow-symlinks to read linked part files anyway)"
                }
                _ => "",
            };
            anyhow::Error::new(e)
                .context(format!("cannot inspect recording {}{hint}", path.display()))
        })?;
        let mut loaded = loaded;
        let rec = loaded.recording.clone();
        let image = global_refs::read_image(&rec, &mut loaded);
        let mut d = describe(&rec, &loaded.warnings);
        mark_globals(&mut d, &rec, &image);
        d
    };
    if args.json {
        println!("{}", render_json(&description));
    } else {
        print!("{}", render_text(&for_people(description)));
    }
    Ok(ExitCode::SUCCESS)
}

/// `d` with every string a recording supplies escaped for a terminal
/// (rrstore_report::shown): names, file names, the image's description,
/// warnings. For the text form only; JSON keeps them exact.
pub fn for_people(mut d: Description) -> Description {
    let esc = |s: &mut String| {
        if let std::borrow::Cow::Owned(e) = rrstore_report::shown::shown(s) {
            *s = e;
        }
    };
    esc(&mut d.kernel);
    esc(&mut d.stem);
    esc(&mut d.descriptor);
    esc(&mut d.image.target);
    esc(&mut d.image.description);
    d.warnings.iter_mut().for_each(esc);
    for (k, v) in d.environment.iter_mut().flatten() {
        esc(k);
        esc(v);
    }
    for p in &mut d.parts {
        esc(&mut p.role);
        esc(&mut p.file);
    }
    d.globals.iter_mut().for_each(|g| esc(&mut g.name));
    for a in &mut d.args {
        esc(&mut a.display);
        if let Some(g) = &mut a.global {
            esc(&mut g.name);
        }
    }
    d
}
