//! The report's "Compiled images" section: every image that replays in
//! the report compiled from LLVM IR, with the provenance its history rows
//! keep (spec/COMPILE.md): the IR and its producer, the target, the
//! compiler (`--version` line and path), every flag, and how many of its
//! replays compiled it and how many found it in the cache. Rows are read
//! from the history, not the image library, so an image removed with
//! `image rm` is still named.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use rrstore_store::Compilation;

use super::data::Gathered;
use super::page::esc;

/// One compiled image over its history rows.
struct Image<'a> {
    hash: [u8; 32],
    recording: String,
    how: &'a Compilation,
    replays: usize,
    cached: usize,
}

/// The section; nothing when no replay ran a compiled image.
pub fn section(g: &Gathered, out: &mut String) {
    // Keyed by image and compile inputs (not by `cached`/`compile_ns`,
    // which differ between the replays of one image).
    let mut images: BTreeMap<(String, String, String, Vec<String>), Image> = BTreeMap::new();
    for e in &g.history {
        let Some(c) = &e.compiled else { continue };
        let key = (
            rrstore_format::id::hex(&e.image_hash),
            c.ir_blake3.clone(),
            c.compiler_blake3.clone(),
            c.flags.clone(),
        );
        let i = images.entry(key).or_insert_with(|| Image {
            hash: e.image_hash,
            recording: e.recording.to_hex(),
            how: c,
            replays: 0,
            cached: 0,
        });
        i.replays += 1;
        i.cached += usize::from(c.cached);
    }
    if images.is_empty() {
        return;
    }
    out.push_str("<section id=\"compiled-images\">\n<h2>Compiled images</h2>\n");
    out.push_str("<p class=\"note\">Images that replays compiled from LLVM IR (<code>--toolchain</code>, <code>--cflags</code>, <code>-fopenmp-target-jit</code> recordings, <code>.bc</code> parts), as their history rows record them.</p>\n");
    out.push_str("<table><thead><tr><th>image</th><th>IR (producer)</th><th>target</th><th>compiler</th><th>flags</th><th class=\"num\">replays</th><th class=\"num\">cached</th></tr></thead><tbody>\n");
    for i in images.values() {
        let c = i.how;
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td><code>{}</code> ({})</td><td>{}</td><td>{}<br><code>{}</code></td><td><code>{}</code></td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
            esc(&g.image_name(&i.recording, &i.hash)),
            esc(&c.ir_blake3[..12.min(c.ir_blake3.len())]),
            esc(c.producer.as_deref().unwrap_or("unknown producer")),
            esc(&c.target),
            esc(&c.compiler_version),
            esc(&c.compiler),
            esc(&c.flags.join(" ")),
            i.replays,
            i.cached
        );
    }
    out.push_str("</tbody></table>\n</section>\n");
}
