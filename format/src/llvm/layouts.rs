//! The table of LLVM's recording layouts ([`LAYOUTS`]): one row per
//! generation of LLVM's record-replay files, each a [`RecordingLayout`]
//! saying everything the rest of the workspace asks of a layout: its name
//! and LLVM versions, how a descriptor is recognised as its own, its file
//! names, its descriptor's fields, its globals table, the checks of its
//! file name and arguments, its launch keys, and the environment that
//! makes LLVM record in it. Detection ([`detect`](super::detect)),
//! loading, finding recordings, export's lossless copy, `inspect`, the
//! manifest checks (`validate`) and `rrstore record` all go through here.
//!
//! Adding a layout: a [`Generation`] variant, a module implementing
//! [`RecordingLayout`] (as [`kernel_named`](super::kernel_named) and
//! [`native`](super::native) do) and its row in [`LAYOUTS`]. Converting
//! other recordings into it (`export --layout`) is export's own
//! ([`Layout`], `export.rs`).

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;

use super::globals::GlobalsError;
use super::json::{Descriptor, JsonError};
use super::{kernel_named, native, Fields, Layout};
use crate::model::{Generation, Global, PartRole, Recording};
use crate::validate::{Check, Inconsistency};

/// One of LLVM's recording layouts (a generation of its record-replay).
pub trait RecordingLayout: Sync {
    /// The generation this row is.
    fn generation(&self) -> Generation;
    /// Stable lowercase name (CLI, JSON output, the store index).
    fn name(&self) -> &'static str;
    /// Which LLVM versions write it (`inspect`).
    fn llvm_versions(&self) -> &'static str;
    /// The file naming it shares with others (`export --layout`).
    fn family(&self) -> Layout;
    /// Descriptor keys only its family writes.
    fn family_keys(&self) -> &'static [&'static str];
    /// Of the descriptors holding its family's keys, whether `d` is this
    /// generation's (default: all of them).
    fn claims(&self, _d: &Descriptor) -> bool {
        true
    }
    /// Whether a descriptor holding no family's keys is this generation's,
    /// from its file stem (default: no).
    fn claims_stem(&self, _stem: &str) -> bool {
        false
    }
    /// File extension (after the stem) of each part.
    fn extension(&self, role: PartRole) -> &'static str;
    /// The descriptor's fields, normalized.
    fn fields(&self, d: &Descriptor) -> Result<Fields, JsonError>;
    /// Parse its globals table of `len` bytes.
    fn parse_globals(&self, r: &mut dyn Read, len: u64) -> Result<Vec<Global>, GlobalsError>;
    /// A warning when the file stem is not what LLVM names the files.
    fn name_warning(&self, stem: &str, f: &Fields) -> Option<String>;
    /// Whether its `ArgPtrs` may hold the recording process' stack slot
    /// addresses (stock LLVM 19-22: [`super::argptrs`]).
    fn may_record_slot_addresses(&self) -> bool;
    /// Check its launch keys in a descriptor against the recording
    /// (`validate`).
    fn check_launch(&self, c: &Check<'_>, rec: &Recording) -> Result<(), Inconsistency>;
    /// The environment that makes LLVM record in this layout into `dir`,
    /// with an arena of `mem_gib` GiB when given.
    fn record_env(&self, dir: &Path, mem_gib: Option<u64>) -> Vec<(&'static str, OsString)>;
}

/// Every layout, oldest first.
pub static LAYOUTS: &[&dyn RecordingLayout] = &[
    &kernel_named::KernelNamedLegacy,
    &kernel_named::KernelNamed,
    &native::Native,
];

/// The row of `generation`.
pub fn of(generation: Generation) -> &'static dyn RecordingLayout {
    LAYOUTS
        .iter()
        .copied()
        .find(|l| l.generation() == generation)
        // Every generation has its row (the table test checks it).
        .unwrap_or(LAYOUTS[0])
}

/// The generation named `name` ([`RecordingLayout::name`]).
pub fn by_name(name: &str) -> Option<Generation> {
    LAYOUTS
        .iter()
        .find(|l| l.name() == name)
        .map(|l| l.generation())
}

/// The input snapshot's extensions of every layout, each once, oldest
/// first (`.memory`, `.record_input`), for messages.
pub fn input_extensions() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for l in LAYOUTS {
        let e = l.extension(PartRole::Input);
        if !out.contains(&e) {
            out.push(e);
        }
    }
    out
}

/// The environment that makes LLVM record in any layout (each variable
/// once, oldest layout's first): what `rrstore record` runs a program with.
pub fn record_env(dir: &Path, mem_gib: Option<u64>) -> Vec<(&'static str, OsString)> {
    let mut env: Vec<(&'static str, OsString)> = Vec::new();
    for l in LAYOUTS {
        for (k, v) in l.record_env(dir, mem_gib) {
            if !env.iter().any(|(have, _)| *have == k) {
                env.push((k, v));
            }
        }
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_generation_has_one_row_and_names_round_trip() {
        for g in [
            Generation::KernelNamedLegacy,
            Generation::KernelNamed,
            Generation::Native,
        ] {
            assert_eq!(
                LAYOUTS.iter().filter(|l| l.generation() == g).count(),
                1,
                "{g:?}"
            );
            assert_eq!(of(g).generation(), g);
            assert_eq!(by_name(of(g).name()), Some(g));
        }
        assert_eq!(input_extensions(), [".memory", ".record_input"]);
    }
}
