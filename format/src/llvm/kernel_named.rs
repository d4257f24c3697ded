//! The kernel-named layouts: legacy LLVM 16-17 and LLVM 18-22.
//!
//! Files `<Name>.json`, `<Name>.memory`, `<Name>.original.output` (optional),
//! and from LLVM 18 `<Name>.globals` and `<Name>.image`. Keys `Name NumArgs
//! ArgPtrs ArgOffsets NumTeamsClause ThreadLimitClause LoopTripCount
//! DeviceMemorySize DeviceId`, plus `BumpAllocVAStart` from LLVM 18.

use super::json::{Descriptor, JsonError};
use super::Fields;
use crate::model::{LaunchConfig, PartRole};

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
