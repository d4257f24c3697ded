//! Which LLVM generation wrote a descriptor, from its keys (and, when the
//! keys say nothing, from the file name), asking each row of the layout
//! table ([`super::layouts`]).

use super::json::Descriptor;
use super::layouts::{RecordingLayout, LAYOUTS};
use crate::model::Generation;

/// Whether a file stem has the native `<u64>_<u64>` shape.
pub fn is_hash_stem(stem: &str) -> bool {
    parse_hash_stem(stem).is_some()
}

/// The two decimal hashes of a `<KernelHash>_<LaunchConfigHash>` stem.
pub fn parse_hash_stem(stem: &str) -> Option<(u64, u64)> {
    let (a, b) = stem.split_once('_')?;
    let dec = |s: &str| {
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    Some((dec(a)?, dec(b)?))
}

/// The generation, or a message saying why none fits: the layouts whose
/// family's keys the descriptor holds ([`LAYOUTS`]; keys of two families
/// are refused), the one of them that claims it, else the one that claims
/// its file stem.
pub fn generation(desc: &Descriptor, stem: &str) -> Result<Generation, String> {
    // The families present, each once, in table order.
    let mut families: Vec<&'static dyn RecordingLayout> = Vec::new();
    for l in LAYOUTS.iter().copied() {
        let present = l.family_keys().iter().any(|k| desc.has(k));
        if present && !families.iter().any(|f| f.family() == l.family()) {
            families.push(l);
        }
    }
    let keys = |l: &dyn RecordingLayout| l.family_keys().join(" ");
    match families.as_slice() {
        [one] => LAYOUTS
            .iter()
            .find(|l| l.family() == one.family() && l.claims(desc))
            .map(|l| l.generation())
            .ok_or_else(|| {
                format!(
                    "the descriptor has {} keys ({}) but no LLVM generation of them fits",
                    one.family(),
                    keys(*one)
                )
            }),
        [] => LAYOUTS
            .iter()
            .find(|l| l.claims_stem(stem))
            .map(|l| l.generation())
            .ok_or_else(|| {
                format!(
                    "not an LLVM record-replay descriptor: none of the keys {} is present",
                    family_rows()
                        .iter()
                        .map(|l| keys(*l))
                        .collect::<Vec<_>>()
                        .join(" or ")
                )
            }),
        // Newest family first.
        several => Err(format!(
            "the descriptor mixes {}; expected one LLVM generation's key set",
            several
                .iter()
                .rev()
                .map(|l| format!("{} keys ({})", l.family(), keys(*l)))
                .collect::<Vec<_>>()
                .join(" with ")
        )),
    }
}

/// One row per family, in table order.
fn family_rows() -> Vec<&'static dyn RecordingLayout> {
    let mut out: Vec<&'static dyn RecordingLayout> = Vec::new();
    for l in LAYOUTS.iter().copied() {
        if !out.iter().any(|f| f.family() == l.family()) {
            out.push(l);
        }
    }
    out
}
