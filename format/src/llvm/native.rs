//! The hash-named "Native" layout (LLVM main, 23+).
//!
//! Files `<KernelHash>_<LaunchConfigHash>.{json,record_input,record_output,
//! globals,image,bc}` (`.replay_output` is a replay artefact and ignored).
//! Keys `Name NumArgs NumTeams NumThreads SharedMemorySize LoopTripCount
//! DeviceId VAllocAddr VAllocSize TeamsLimits ThreadsLimits ArgPtrs
//! ArgOffsets`.

use super::json::{Descriptor, JsonError};
use super::Fields;
use crate::model::{LaunchConfig, PartRole};

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
