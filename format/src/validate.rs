//! Consistency of a [`Recording`] that did not come from [`crate::llvm::load`]
//! (an archive's manifest, a store's index): the checks `load` makes while
//! building one, made again on the finished metadata, so that a hand-edited
//! or damaged manifest is refused before a replay, an import or an export
//! trusts it.
//!
//! Checked: `args` and `arg_offsets` agree in length; an input part exists;
//! parts appear once each, in [`PartRole::ALL`] order; output and arena
//! match the input's length; every global lies inside the globals part; and
//! every launch key the embedded descriptor holds says what the recording
//! says (the descriptor is what `export`/`unpack` writes back verbatim).

use crate::llvm::json::{self, Descriptor, JsonError};
use crate::model::{PartRole, Recording};

/// What is inconsistent: the recording field (or descriptor key) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct Inconsistency {
    /// `args`, `parts`, `globals[3]`, `descriptor.DeviceMemorySize`, ...
    pub field: String,
    pub message: String,
}

fn bad(field: impl Into<String>, message: impl Into<String>) -> Inconsistency {
    Inconsistency {
        field: field.into(),
        message: message.into(),
    }
}

/// Check `rec` (see the module doc). The first inconsistency found wins.
pub fn recording(rec: &Recording) -> Result<(), Inconsistency> {
    if rec.args.len() != rec.arg_offsets.len() {
        return Err(bad(
            "args",
            format!(
                "{} argument values but {} argument offsets; a recording has one offset per argument",
                rec.args.len(),
                rec.arg_offsets.len()
            ),
        ));
    }
    parts(rec)?;
    globals(rec)?;
    if let Some(why) = rec
        .environment
        .as_deref()
        .and_then(crate::environment::check)
    {
        return Err(bad("environment", why));
    }
    descriptor(rec)
}

fn parts(rec: &Recording) -> Result<(), Inconsistency> {
    let rank = |r: PartRole| PartRole::ALL.iter().position(|&a| a == r);
    for w in rec.parts.windows(2) {
        if rank(w[0].role) >= rank(w[1].role) {
            let what = if w[0].role == w[1].role {
                format!("the {} part is listed twice", w[1].role)
            } else {
                format!(
                    "the {} part is listed after the {} part; parts come once each in the order input, output, globals, image, bitcode",
                    w[1].role, w[0].role
                )
            };
            return Err(bad("parts", what));
        }
    }
    let input = rec.part(PartRole::Input).ok_or_else(|| {
        bad(
            "parts",
            "there is no input part; every recording has an input snapshot",
        )
    })?;
    if let Some(out) = rec.part(PartRole::Output) {
        if out.len != input.len {
            return Err(bad(
                "parts",
                format!(
                    "the output part has {} bytes but the input part {}; both snapshots cover the same arena",
                    out.len, input.len
                ),
            ));
        }
    }
    if rec.arena.size != input.len {
        return Err(bad(
            "arena.size",
            format!(
                "is {} but the input part has {} bytes; expected them equal",
                rec.arena.size, input.len
            ),
        ));
    }
    if let Some(reserved) = rec.arena.reserved {
        if reserved < input.len {
            return Err(bad(
                "arena.reserved",
                format!(
                    "is {reserved} but the input part has {} bytes; expected at least that",
                    input.len
                ),
            ));
        }
    }
    Ok(())
}

fn globals(rec: &Recording) -> Result<(), Inconsistency> {
    let len = rec.part(PartRole::Globals).map(|p| p.len);
    for (i, g) in rec.globals.iter().enumerate() {
        let Some(len) = len else {
            return Err(bad(
                format!("globals[{i}]"),
                format!(
                    "the recording lists global `{}` but has no globals part",
                    g.name
                ),
            ));
        };
        if g.data_offset
            .checked_add(g.size)
            .is_none_or(|end| end > len)
        {
            return Err(bad(
                format!("globals[{i}]"),
                format!(
                    "global `{}` ({} bytes at offset {}) lies outside the {len}-byte globals part",
                    g.name, g.size, g.data_offset
                ),
            ));
        }
    }
    Ok(())
}

/// Each launch key present in the descriptor must match the recording.
/// Keys it lacks are not checked (the archive tests' synthetic recordings
/// carry partial descriptors); a descriptor that is not a JSON object is
/// refused.
fn descriptor(rec: &Recording) -> Result<(), Inconsistency> {
    let d = json::parse_descriptor(&rec.descriptor).map_err(|e| {
        bad(
            "descriptor",
            format!("{e}; expected LLVM's JSON launch descriptor"),
        )
    })?;
    let c = Check { d: &d };
    c.eq("Name", Descriptor::string, &rec.kernel)?;
    c.eq("NumArgs", Descriptor::u64, &(rec.args.len() as u64))?;
    c.eq("ArgPtrs", Descriptor::bits_array, &rec.args)?;
    c.eq("ArgOffsets", Descriptor::i64_array, &rec.arg_offsets)?;
    c.eq("DeviceId", Descriptor::i64, &rec.device_id)?;
    c.eq(
        "LoopTripCount",
        Descriptor::u64,
        &rec.launch.loop_trip_count,
    )?;
    // The generation's own launch keys (its row of the layout table).
    crate::llvm::layouts::of(rec.generation).check_launch(&c, rec)
}

/// The check of a descriptor's keys against a recording: a key present
/// must say what the recording says (the layouts' launch keys use it).
pub struct Check<'a> {
    d: &'a Descriptor,
}

impl Check<'_> {
    /// `key`, when present, must read as `want`.
    pub fn eq<T: PartialEq + std::fmt::Debug>(
        &self,
        key: &str,
        get: fn(&Descriptor, &str) -> Result<T, JsonError>,
        want: &T,
    ) -> Result<(), Inconsistency> {
        if !self.d.has(key) {
            return Ok(());
        }
        let field = || format!("descriptor.{key}");
        let got = get(self.d, key).map_err(|e| bad(field(), e.to_string()))?;
        if &got != want {
            return Err(bad(
                field(),
                format!(
                    "the embedded descriptor says {} but the recording says {}; the manifest contradicts its descriptor",
                    short(&got),
                    short(want)
                ),
            ));
        }
        Ok(())
    }

    /// Like [`Check::eq`] for a field the recording may lack: present in the
    /// descriptor means the recording must hold the same value.
    pub fn opt<T: PartialEq + std::fmt::Debug>(
        &self,
        key: &str,
        get: fn(&Descriptor, &str) -> Result<T, JsonError>,
        want: &Option<T>,
    ) -> Result<(), Inconsistency> {
        if !self.d.has(key) {
            return Ok(());
        }
        match want {
            Some(w) => self.eq(key, get, w),
            None => Err(bad(
                format!("descriptor.{key}"),
                "the embedded descriptor has this key but the recording has no such value; the manifest contradicts its descriptor",
            )),
        }
    }
}

/// A value for a message, cut short (argument lists can be 100,000 long).
fn short<T: std::fmt::Debug>(v: &T) -> String {
    let s = format!("{v:?}");
    if s.len() <= 120 {
        return s;
    }
    let cut = (0..=117)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0);
    format!("{}...", &s[..cut])
}
