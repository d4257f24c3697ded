//! The normalized recording model: one recorded kernel launch, independent of
//! the LLVM generation that wrote it and of how its bytes are stored.
//!
//! A [`Recording`] holds only metadata. The bytes of its parts (snapshots,
//! globals table, image, bitcode) are large and always streamed; the model
//! carries their length and blake3 so a recording can be identified
//! ([`crate::id`]) and verified without holding any part in memory.

use serde::{Deserialize, Serialize};

use crate::image::ImageTarget;

/// The on-disk layout a recording was written in by LLVM's record-replay.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Generation {
    /// LLVM 16-17: `<Name>.json`, `<Name>.memory`, `<Name>.original.output`.
    /// No image, no globals, no arena address.
    KernelNamedLegacy,
    /// LLVM 18-22: adds `<Name>.image`, `<Name>.globals` and `BumpAllocVAStart`.
    KernelNamed,
    /// LLVM 23+ ("Native"): `<KernelHash>_<LaunchConfigHash>.{json,record_input,...}`.
    Native,
}

impl Generation {
    /// Stable lowercase name used in the CLI, JSON output and the store index.
    /// The name is its row's in the layout table ([`crate::llvm::layouts`]).
    pub fn as_str(self) -> &'static str {
        crate::llvm::layouts::of(self).name()
    }
}

impl std::fmt::Display for Generation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a part of a recording is.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum PartRole {
    /// Device memory arena right before the launch (`.memory` / `.record_input`).
    Input,
    /// The same range right after the launch (`.original.output` / `.record_output`).
    Output,
    /// The globals table, verbatim in the encoding of the source generation.
    Globals,
    /// The device image (`.image`).
    Image,
    /// Device IR (`.bc`), when present.
    Bitcode,
}

impl PartRole {
    /// All roles in canonical order (the order parts appear in a recording).
    pub const ALL: [PartRole; 5] = [
        PartRole::Input,
        PartRole::Output,
        PartRole::Globals,
        PartRole::Image,
        PartRole::Bitcode,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PartRole::Input => "input",
            PartRole::Output => "output",
            PartRole::Globals => "globals",
            PartRole::Image => "image",
            PartRole::Bitcode => "bitcode",
        }
    }
}

impl std::fmt::Display for PartRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Length and content hash of one part's uncompressed bytes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct PartInfo {
    pub role: PartRole,
    pub len: u64,
    /// blake3 of the part's uncompressed bytes.
    pub blake3: [u8; 32],
}

/// One device global captured before the launch.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Global {
    pub name: String,
    pub size: u64,
    /// Byte offset of this global's data inside the globals part (as stored,
    /// i.e. in the source generation's encoding).
    pub data_offset: u64,
}

/// Launch configuration as recorded.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct LaunchConfig {
    /// `NumTeamsClause` (kernel-named) or `NumTeams` (native).
    pub num_teams: u64,
    /// `ThreadLimitClause` (kernel-named) or `NumThreads` (native).
    pub num_threads: u64,
    /// Dynamic shared memory bytes (`SharedMemorySize`; 0 before LLVM 23).
    pub shared_memory: u64,
    pub loop_trip_count: u64,
    /// `TeamsLimits` (native only): `[min, max]`, 0 = unbounded.
    pub teams_limits: Option<[u64; 2]>,
    /// `ThreadsLimits` (native only): `[min, max]`.
    pub threads_limits: Option<[u64; 2]>,
}

/// The device memory arena the snapshots cover.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Arena {
    /// Virtual address of the arena start in the recording process
    /// (`BumpAllocVAStart` / `VAllocAddr`); `None` for the legacy generation.
    pub base: Option<u64>,
    /// Bytes covered by the snapshots (`DeviceMemorySize`, or the snapshot
    /// length in the native layout).
    pub size: u64,
    /// Bytes reserved for the arena when recording (`VAllocSize`), if known.
    pub reserved: Option<u64>,
}

impl Arena {
    /// If `value` points into the snapshot range, its offset from the base.
    pub fn offset_of(&self, value: u64) -> Option<u64> {
        let base = self.base?;
        let off = value.checked_sub(base)?;
        (off < self.size.max(1)).then_some(off)
    }
}

/// One recorded kernel launch, normalized.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Recording {
    /// Kernel symbol name (`Name`).
    pub kernel: String,
    /// Which layout the recording was imported from (export reproduces it).
    pub generation: Generation,
    /// File stem the recording's files had (kernel name, or
    /// `<KernelHash>_<LaunchConfigHash>`).
    pub stem: String,
    /// Argument values (`ArgPtrs`), bit-exact 64-bit values; -1 is stored as
    /// `u64::MAX`.
    pub args: Vec<u64>,
    /// `ArgOffsets`, as signed 64-bit values.
    pub arg_offsets: Vec<i64>,
    pub launch: LaunchConfig,
    pub device_id: i64,
    pub arena: Arena,
    /// Globals parsed from the globals part, in file order.
    pub globals: Vec<Global>,
    /// Target of the device image, detected from its bytes.
    pub image_target: ImageTarget,
    /// The original JSON descriptor, byte for byte.
    pub descriptor: Vec<u8>,
    /// Parts present, in [`PartRole::ALL`] order, at most one per role.
    pub parts: Vec<PartInfo>,
    /// The launch environment the recording process ran with: the OpenMP
    /// settings that decide the result on the host (`OMP_NUM_THREADS`,
    /// `OMP_SCHEDULE`, ...: [`crate::environment`]), sorted by name. `None`
    /// when unknown (LLVM's files do not say; `rrstore record` stores it,
    /// empty when none was set). Absent from the encoding when `None`, so
    /// the IDs of recordings without one are unchanged (spec/FORMAT.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Vec<(String, String)>>,
}

impl Recording {
    pub fn part(&self, role: PartRole) -> Option<&PartInfo> {
        self.parts.iter().find(|p| p.role == role)
    }

    /// Total uncompressed bytes of all parts plus the descriptor.
    pub fn logical_size(&self) -> u64 {
        self.parts.iter().map(|p| p.len).sum::<u64>() + self.descriptor.len() as u64
    }

    /// Check that the metadata holds together (see [`crate::validate`]):
    /// what a reader of metadata it did not build itself must call.
    pub fn validate(&self) -> Result<(), crate::validate::Inconsistency> {
        crate::validate::recording(self)
    }

    /// The content address of this recording (see [`crate::id`]).
    pub fn id(&self) -> crate::RecordingId {
        crate::id::recording_id(self)
    }
}

/// Where the bytes of a recording's parts come from: files on disk, an
/// archive, a store. Errors are `io::Error`s so any source can report its
/// own error type inside one (callers may downcast `get_ref()`).
pub trait PartSource {
    /// Stream a part's uncompressed bytes from the start.
    fn open_part(&mut self, role: PartRole) -> std::io::Result<Box<dyn std::io::Read + '_>>;

    /// The plain file holding exactly this part's bytes, if the source has
    /// one (lets a writer's worker threads read blocks of it by offset, in
    /// parallel). `None` (the default): read through [`PartSource::open_part`].
    fn part_file(&self, role: PartRole) -> Option<&std::path::Path> {
        let _ = role;
        None
    }

    /// Fill `dst`, whose length is the part's length, with the part's bytes.
    /// Sources that hold compressed chunks override this to decode straight
    /// into `dst` (no intermediate copy of the part).
    fn read_part_into(&mut self, role: PartRole, dst: &mut [u8]) -> std::io::Result<()> {
        let mut r = self.open_part(role)?;
        r.read_exact(dst)?;
        let mut probe = [0u8; 1];
        if r.read(&mut probe)? != 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("the {role} part is longer than {} bytes", dst.len()),
            ));
        }
        Ok(())
    }

    /// Where the part's stored bytes lie in files on disk, when the source
    /// can say (a store's packs, an archive, a raw LLVM file): lets a reader
    /// in another process decode them itself. `None` (the default): the
    /// bytes are only available through this source's reads.
    fn extents(&mut self, role: PartRole) -> std::io::Result<Option<crate::extents::PartExtents>> {
        let _ = role;
        Ok(None)
    }

    /// Whether [`read_part_range_into`](Self::read_part_range_into) reaches
    /// any offset cheaply (chunks addressable by offset, e.g. a store).
    /// Callers that read a part window by window use it only then, and
    /// stream with [`open_part`](Self::open_part) otherwise. Default: false.
    fn random_access(&self) -> bool {
        false
    }

    /// Fill `dst` with the part's bytes `offset..offset + dst.len()`.
    /// Random-access sources override this (decoding only the chunks in the
    /// range, possibly on several threads); the default streams from the
    /// start and skips `offset` bytes.
    fn read_part_range_into(
        &mut self,
        role: PartRole,
        offset: u64,
        dst: &mut [u8],
    ) -> std::io::Result<()> {
        let mut r = self.open_part(role)?;
        let skipped = std::io::copy(
            &mut std::io::Read::take(&mut r, offset),
            &mut std::io::sink(),
        )?;
        if skipped != offset {
            return Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("the {role} part ends before byte {offset}"),
            ));
        }
        r.read_exact(dst)
    }
}
