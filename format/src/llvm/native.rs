//! The hash-named "Native" layout (LLVM main, 23+).
//!
//! Files `<KernelHash>_<LaunchConfigHash>.{json,record_input,record_output,
//! globals,image,bc}` (`.replay_output` is a replay artefact and ignored).
//! Keys `Name NumArgs NumTeams NumThreads SharedMemorySize LoopTripCount
//! DeviceId VAllocAddr VAllocSize TeamsLimits ThreadsLimits ArgPtrs
//! ArgOffsets`. Its row of the layout table ([`super::layouts`]) is
//! [`Native`].

use std::ffi::OsString;
use std::io::Read;
use std::path::Path;

use super::globals::GlobalsError;
use super::json::{Descriptor, JsonError};
use super::layouts::RecordingLayout;
use super::{hashes, Fields, Layout};
use crate::model::{Generation, Global, LaunchConfig, PartRole, Recording};
use crate::validate::{Check, Inconsistency};

/// File extension of each part (after the stem).
pub fn extension(role: PartRole) -> &'static str {
    match role {
        PartRole::Input => ".record_input",
        PartRole::Output => ".record_output",
        PartRole::Globals => ".globals",
        PartRole::Image => ".image",
        PartRole::Bitcode => ".bc",
    }
}

/// Read the normalized fields.
pub fn fields(d: &Descriptor) -> Result<Fields, JsonError> {
    Ok(Fields {
        kernel: d.string("Name")?,
        num_args: d.u64("NumArgs")?,
        args: d.bits_array("ArgPtrs")?,
        arg_offsets: d.i64_array("ArgOffsets")?,
        launch: LaunchConfig {
            num_teams: d.u64("NumTeams")?,
            num_threads: d.u64("NumThreads")?,
            shared_memory: d.u64("SharedMemorySize")?,
            loop_trip_count: d.u64("LoopTripCount")?,
            teams_limits: Some(d.u64_pair("TeamsLimits")?),
            threads_limits: Some(d.u64_pair("ThreadsLimits")?),
        },
        device_id: d.i64("DeviceId")?,
        arena_base: Some(d.u64("VAllocAddr")?),
        memory_size: None,
        reserved: Some(d.u64("VAllocSize")?),
    })
}

/// Keys only the native layout writes.
pub const KEYS: &[&str] = &[
    "VAllocAddr",
    "VAllocSize",
    "NumTeams",
    "NumThreads",
    "TeamsLimits",
];

/// The LLVM 23+ row of [`LAYOUTS`](super::layouts::LAYOUTS).
pub struct Native;

impl RecordingLayout for Native {
    fn generation(&self) -> Generation {
        Generation::Native
    }
    fn name(&self) -> &'static str {
        "native"
    }
    fn llvm_versions(&self) -> &'static str {
        "LLVM 23+"
    }
    fn family(&self) -> Layout {
        Layout::Native
    }
    fn family_keys(&self) -> &'static [&'static str] {
        KEYS
    }
    /// A `<u64>_<u64>` stem is a native recording's.
    fn claims_stem(&self, stem: &str) -> bool {
        super::detect::is_hash_stem(stem)
    }
    fn extension(&self, role: PartRole) -> &'static str {
        extension(role)
    }
    fn fields(&self, d: &Descriptor) -> Result<Fields, JsonError> {
        fields(d)
    }
    fn parse_globals(&self, r: &mut dyn Read, len: u64) -> Result<Vec<Global>, GlobalsError> {
        super::globals::parse_native(r, len)
    }
    /// LLVM names the files after the kernel's and the launch's hashes.
    fn name_warning(&self, stem: &str, f: &Fields) -> Option<String> {
        let want_k = hashes::kernel_hash(&f.kernel);
        let want_l = hashes::launch_config_hash(
            f.launch.num_teams,
            f.launch.num_threads,
            f.launch.shared_memory,
        );
        let want = format!("{want_k}_{want_l}");
        if stem == want {
            return None;
        }
        let detail = match super::detect::parse_hash_stem(stem) {
            Some((k, l)) => format!(
                "KernelHash {k} (recomputed {want_k}), LaunchConfigHash {l} (recomputed {want_l})"
            ),
            None => "the name is not <KernelHash>_<LaunchConfigHash>".to_string(),
        };
        Some(format!(
            "file name `{stem}` does not match the recomputed hashes `{want}`: {detail}"
        ))
    }
    fn may_record_slot_addresses(&self) -> bool {
        false
    }
    fn check_launch(&self, c: &Check<'_>, rec: &Recording) -> Result<(), Inconsistency> {
        let l = &rec.launch;
        c.eq("NumTeams", Descriptor::u64, &l.num_teams)?;
        c.eq("NumThreads", Descriptor::u64, &l.num_threads)?;
        c.eq("SharedMemorySize", Descriptor::u64, &l.shared_memory)?;
        c.opt("TeamsLimits", Descriptor::u64_pair, &l.teams_limits)?;
        c.opt("ThreadsLimits", Descriptor::u64_pair, &l.threads_limits)?;
        c.opt("VAllocAddr", Descriptor::u64, &rec.arena.base)?;
        c.opt("VAllocSize", Descriptor::u64, &rec.arena.reserved)?;
        Ok(())
    }
    /// LLVM 23+'s switches: record, save the output, write into `dir`; the
    /// arena size in bytes.
    fn record_env(&self, dir: &Path, mem_gib: Option<u64>) -> Vec<(&'static str, OsString)> {
        let mut env = vec![
            ("LIBOMPTARGET_RECORD", OsString::from("1")),
            ("LIBOMPTARGET_RECORD_OUTPUT", OsString::from("1")),
            ("LIBOMPTARGET_RECORD_DIR", dir.as_os_str().to_os_string()),
        ];
        if let Some(g) = mem_gib {
            env.push((
                "LIBOMPTARGET_RECORD_MEMSIZE",
                OsString::from((g << 30).to_string()),
            ));
        }
        env
    }
}
