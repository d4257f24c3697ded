//! The kernel-named layouts: legacy LLVM 16-17 and LLVM 18-22.
//!
//! Files `<Name>.json`, `<Name>.memory`, `<Name>.original.output` (optional),
//! and from LLVM 18 `<Name>.globals` and `<Name>.image`. Keys `Name NumArgs
//! ArgPtrs ArgOffsets NumTeamsClause ThreadLimitClause LoopTripCount
//! DeviceMemorySize DeviceId`, plus `BumpAllocVAStart` from LLVM 18.
//! Two rows of the layout table ([`super::layouts`]): [`KernelNamedLegacy`]
//! and [`KernelNamed`].

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;

use super::globals::GlobalsError;
use super::json::{Descriptor, JsonError};
use super::layouts::RecordingLayout;
use super::{Fields, Layout};
use crate::model::{Generation, Global, LaunchConfig, PartRole, Recording};
use crate::validate::{Check, Inconsistency};

/// File extension of each part (after the stem).
pub fn extension(role: PartRole) -> &'static str {
    match role {
        PartRole::Input => ".memory",
        PartRole::Output => ".original.output",
        PartRole::Globals => ".globals",
        PartRole::Image => ".image",
        PartRole::Bitcode => ".bc",
    }
}

/// Read the normalized fields. `legacy` = LLVM 16-17 (no arena address).
pub fn fields(d: &Descriptor, legacy: bool) -> Result<Fields, JsonError> {
    Ok(Fields {
        kernel: d.string("Name")?,
        num_args: d.u64("NumArgs")?,
        args: d.bits_array("ArgPtrs")?,
        arg_offsets: d.i64_array("ArgOffsets")?,
        launch: LaunchConfig {
            num_teams: d.u64("NumTeamsClause")?,
            num_threads: d.u64("ThreadLimitClause")?,
            // Not recoverable for LLVM 18-22: those plugins launched with
            // max(KernelArgs.DynCGroupMem, LIBOMPTARGET_SHARED_MEMORY_SIZE),
            // neither of which the recorder wrote, and their kernel launch
            // environment (argument 0, in the snapshot when the kernel has
            // reductions, else the sentinel -1) is `{u32 ReductionCnt, u32
            // ReductionIterCnt, void *ReductionBuffer}`, without the
            // `DynCGroupMemSize` field the dyn_groupprivate work added after
            // LLVM 22 (absent from libomptarget 22.1.8). See docs/gpu.md.
            shared_memory: 0,
            loop_trip_count: d.u64("LoopTripCount")?,
            teams_limits: None,
            threads_limits: None,
        },
        device_id: d.i64("DeviceId")?,
        arena_base: if legacy {
            None
        } else {
            Some(d.u64("BumpAllocVAStart")?)
        },
        memory_size: Some(d.u64("DeviceMemorySize")?),
        reserved: None,
    })
}

/// Keys only the kernel-named layouts write.
pub const KEYS: &[&str] = &["NumTeamsClause", "ThreadLimitClause", "DeviceMemorySize"];

/// The LLVM 16-17 row of [`LAYOUTS`](super::layouts::LAYOUTS).
pub struct KernelNamedLegacy;
/// The LLVM 18-22 row of [`LAYOUTS`](super::layouts::LAYOUTS).
pub struct KernelNamed;

/// What both kernel-named rows share; `legacy`: LLVM 16-17.
fn launch_checks(c: &Check<'_>, rec: &Recording, legacy: bool) -> Result<(), Inconsistency> {
    let l = &rec.launch;
    c.eq("NumTeamsClause", Descriptor::u64, &l.num_teams)?;
    c.eq("ThreadLimitClause", Descriptor::u64, &l.num_threads)?;
    c.eq("DeviceMemorySize", Descriptor::u64, &rec.arena.size)?;
    if !legacy {
        c.opt("BumpAllocVAStart", Descriptor::u64, &rec.arena.base)?;
    }
    Ok(())
}

/// LLVM names the files after the kernel.
fn stem_warning(stem: &str, f: &Fields) -> Option<String> {
    (stem != f.kernel).then(|| {
        format!(
            "file name `{stem}` differs from the kernel name `{}` LLVM names the files after",
            f.kernel
        )
    })
}

/// LLVM 16-22's recording switches: record, and save the post-launch
/// snapshot (`.original.output`); the arena size in GiB.
fn env(mem_gib: Option<u64>) -> Vec<(&'static str, OsString)> {
    let mut env = vec![
        ("LIBOMPTARGET_RECORD", OsString::from("1")),
        ("LIBOMPTARGET_RR_SAVE_OUTPUT", OsString::from("1")),
    ];
    if let Some(g) = mem_gib {
        env.push(("LIBOMPTARGET_RR_DEVMEM_SIZE", OsString::from(g.to_string())));
    }
    env
}

macro_rules! kernel_named_row {
    ($row:ty, $generation:expr, $name:expr, $llvm:expr, $legacy:expr) => {
        impl RecordingLayout for $row {
            fn generation(&self) -> Generation {
                $generation
            }
            fn name(&self) -> &'static str {
                $name
            }
            fn llvm_versions(&self) -> &'static str {
                $llvm
            }
            fn family(&self) -> Layout {
                Layout::KernelNamed
            }
            fn family_keys(&self) -> &'static [&'static str] {
                KEYS
            }
            /// LLVM 18 added `BumpAllocVAStart`.
            fn claims(&self, d: &Descriptor) -> bool {
                d.has("BumpAllocVAStart") != $legacy
            }
            fn extension(&self, role: PartRole) -> &'static str {
                extension(role)
            }
            fn fields(&self, d: &Descriptor) -> Result<Fields, JsonError> {
                fields(d, $legacy)
            }
            fn parse_globals(
                &self,
                r: &mut dyn Read,
                len: u64,
            ) -> Result<Vec<Global>, GlobalsError> {
                super::globals::parse_kernel_named(r, len)
            }
            fn name_warning(&self, stem: &str, f: &Fields) -> Option<String> {
                stem_warning(stem, f)
            }
            fn may_record_slot_addresses(&self) -> bool {
                true
            }
            fn check_launch(&self, c: &Check<'_>, rec: &Recording) -> Result<(), Inconsistency> {
                launch_checks(c, rec, $legacy)
            }
            fn record_env(
                &self,
                _dir: &Path,
                mem_gib: Option<u64>,
            ) -> Vec<(&'static str, OsString)> {
                env(mem_gib)
            }
        }
    };
}

kernel_named_row!(
    KernelNamedLegacy,
    Generation::KernelNamedLegacy,
    "kernel-named-legacy",
    "LLVM 16-17",
    true
);
kernel_named_row!(
    KernelNamed,
    Generation::KernelNamed,
    "kernel-named",
    "LLVM 18-22",
    false
);
