//! The rehydration contract: how a backend gets the input snapshot into its
//! arena, and where the arena is placed first.
//!
//! The engine hands a backend an [`InputSource`] and lets it choose how the
//! bytes travel ([`Backend::fill`]): read the files that hold them itself
//! (the host runner decodes a store's packs straight into its arena), or
//! be handed them piece by piece, decoded into its staging windows (pinned
//! DMA buffers, the host backend's buffer) or into a buffer passed to
//! `upload`. The default, [`copy_in`], is the second way; a backend
//! overrides `fill` only to add a faster one, and falls back to `copy_in`
//! itself, so the engine has no backend-specific branch.
//!
//! # What comes next
//! * **Placement.** [`Backend::place`] returns the base the arena actually
//!   got ([`Placement`]). Today every backend maps it at the recorded
//!   address (pointers inside the snapshot are not relocated) and the engine
//!   refuses any other base; a relocating replay plugs in here: a backend
//!   that cannot get the recorded range returns another base and the engine
//!   rewrites the pointers it knows of before the fill.
//! * **A device per replay.** The device is chosen when the backend is
//!   opened ([`super::open`]), from its configuration; a `--device` option
//!   becomes a field of the GPU backends' configuration, not of the engine.
//! * **A confined runner.** How the host runner is started is the host
//!   backend's configuration ([`super::host::config`]); the contract here
//!   does not change when the runner runs confined.

use std::time::Duration;

use rrstore_format::extents::PartExtents;
use serde::Serialize;

use super::{Backend, BackendError};

/// What the engine asks of the arena's placement.
#[derive(Clone, Copy, Debug)]
pub struct ArenaRequest<'a> {
    /// The recorded arena base.
    pub base: u64,
    pub size: u64,
    /// The image the replay will load after the reservation: a backend may
    /// prepare for it (the host backend uses a spare runner that preloaded
    /// the offload runtime only for an image that needs it). Errors in the
    /// image are `load_image`'s to report.
    pub image: &'a [u8],
    /// Refuse (`BackendError::Reserve`) a reservation where the backend's
    /// zeroed slack after the arena ([`Relocation::slack_footprint`])
    /// cannot be mapped in full: set for relocation candidates, so that a
    /// relocated arena goes where its whole footprint fits. Ignored by a
    /// backend without slack.
    ///
    /// [`Relocation::slack_footprint`]: super::Relocation::slack_footprint
    pub whole_footprint: bool,
}

/// Where the arena was placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The base actually used (today always the recorded one).
    pub base: u64,
}

/// The input snapshot, as the engine offers it to [`Backend::fill`]. One
/// value serves one pass: [`read_at`](Self::read_at) is called at
/// increasing offsets from 0.
pub trait InputSource {
    /// Bytes of the input (the arena's size).
    fn len(&self) -> u64;

    /// Whether the input is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The files that hold the input, for a backend that decodes and
    /// verifies them itself; `None` when the source cannot name them.
    fn extents(&self) -> Option<&PartExtents>;

    /// Largest piece to decode at once into a buffer of the engine's when
    /// the backend has no staging window (bounded memory).
    fn piece_len(&self) -> usize;

    /// Write the input bytes at `offset` into `dst`.
    fn read_at(&mut self, offset: u64, dst: &mut [u8]) -> Result<(), InputError>;
}

/// The input could not be read (a part file gone, a corrupt chunk).
#[derive(Debug, thiserror::Error)]
#[error("reading the input snapshot at offset {offset}: {source}")]
pub struct InputError {
    pub offset: u64,
    #[source]
    pub source: std::io::Error,
}

/// Why a fill failed: the backend, or the input it was handed.
#[derive(Debug, thiserror::Error)]
pub enum FillError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Input(#[from] InputError),
}

/// How the input snapshot reached the arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RehydratePath {
    /// The backend read and decoded the source's files itself.
    Files,
    /// The engine decoded the input and handed the bytes over.
    Engine,
}

/// What memory a host arena is (`timing.arena_memory` of a replay's
/// report; `rrstore_replay::backend::host::arena` says why each).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ArenaMemory {
    /// Fresh anonymous memory, advised to use transparent huge pages.
    Transparent,
    /// Its 2 MiB-aligned interior from the huge page pool.
    Pool,
    /// A slot of the arena cache, kept between replays.
    Held,
    /// A sealed memfd that rrstore maps too: where rrstore may not read a
    /// runner's memory with `process_vm_readv` (a seccomp profile without
    /// it, Yama `ptrace_scope` 3), or when asked to (`ArenaIo::Shared`).
    /// Its pages are 4 KiB where `shmem_enabled` is off.
    Shared,
}

impl ArenaMemory {
    /// The byte the host runner's `Reserve` reply carries.
    pub fn to_u8(self) -> u8 {
        match self {
            ArenaMemory::Transparent => 0,
            ArenaMemory::Pool => 1,
            ArenaMemory::Held => 2,
            ArenaMemory::Shared => 3,
        }
    }

    pub fn from_u8(b: u8) -> Option<ArenaMemory> {
        Some(match b {
            0 => ArenaMemory::Transparent,
            1 => ArenaMemory::Pool,
            2 => ArenaMemory::Held,
            3 => ArenaMemory::Shared,
            _ => return None,
        })
    }
}

/// What a fill did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FillOutcome {
    pub path: RehydratePath,
    /// The fill's own duration, measured where it ran (the host runner);
    /// `None`: the engine's measurement around the call stands.
    pub took: Option<Duration>,
}

/// Hand `input` to `backend` in order, piece by piece: decoded straight
/// into a staging window when the backend has one, else into a buffer of at
/// most [`InputSource::piece_len`] bytes passed to `upload`. The default
/// [`Backend::fill`].
pub fn copy_in<B: Backend + ?Sized>(
    backend: &mut B,
    input: &mut dyn InputSource,
) -> Result<FillOutcome, FillError> {
    let size = input.len();
    let piece = input.piece_len().max(1);
    let mut buf = Vec::new();
    let mut off = 0u64;
    while off < size {
        let left = usize::try_from(size - off).unwrap_or(usize::MAX);
        if let Some(w) = backend.staging_window(left)? {
            let n = w.len().min(left);
            if n > 0 {
                input.read_at(off, &mut w[..n])?;
                backend.commit_staging(off, n)?;
                off += n as u64;
                continue;
            }
        }
        let n = piece.min(left);
        buf.resize(n, 0);
        input.read_at(off, &mut buf[..n])?;
        backend.upload(off, &buf[..n])?;
        off += n as u64;
    }
    Ok(FillOutcome {
        path: RehydratePath::Engine,
        took: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{LaunchParams, Relocation, Reporting};

    /// A device that records what reaches its arena, with or without
    /// staging windows.
    struct Recorder {
        arena: Vec<u8>,
        window: Option<Vec<u8>>,
        commits: usize,
        uploads: usize,
    }

    impl Backend for Recorder {
        fn name(&self) -> &'static str {
            "recorder"
        }
        fn device_description(&self) -> String {
            String::new()
        }
        fn reserve(&mut self, _: u64, _: u64) -> Result<(), BackendError> {
            Ok(())
        }
        fn upload(&mut self, offset: u64, data: &[u8]) -> Result<(), BackendError> {
            self.uploads += 1;
            self.arena[offset as usize..offset as usize + data.len()].copy_from_slice(data);
            Ok(())
        }
        fn load_image(&mut self, _: &[u8], _: &str) -> Result<(), BackendError> {
            Ok(())
        }
        fn write_global(&mut self, _: &str, _: &[u8]) -> Result<(), BackendError> {
            Ok(())
        }
        fn launch(&mut self, _: &[u64], _: &LaunchParams) -> Result<Duration, BackendError> {
            Ok(Duration::ZERO)
        }
        fn download(&mut self, _: u64, _: &mut [u8]) -> Result<(), BackendError> {
            Ok(())
        }
        fn staging_window(&mut self, max_len: usize) -> Result<Option<&mut [u8]>, BackendError> {
            Ok(self.window.as_mut().map(|w| {
                let n = w.len().min(max_len);
                w.fill(0xee);
                &mut w[..n]
            }))
        }
        fn commit_staging(&mut self, offset: u64, len: usize) -> Result<(), BackendError> {
            self.commits += 1;
            let w = self
                .window
                .as_ref()
                .map(|w| w[..len].to_vec())
                .unwrap_or_default();
            self.arena[offset as usize..offset as usize + len].copy_from_slice(&w);
            Ok(())
        }
    }

    impl Reporting for Recorder {}

    impl Relocation for Recorder {}

    struct Bytes<'a>(&'a [u8], usize);

    impl InputSource for Bytes<'_> {
        fn len(&self) -> u64 {
            self.0.len() as u64
        }
        fn extents(&self) -> Option<&PartExtents> {
            None
        }
        fn piece_len(&self) -> usize {
            self.1
        }
        fn read_at(&mut self, off: u64, dst: &mut [u8]) -> Result<(), InputError> {
            dst.copy_from_slice(&self.0[off as usize..off as usize + dst.len()]);
            Ok(())
        }
    }

    #[test]
    fn windows_and_uploads_deliver_every_byte_in_place() {
        let input: Vec<u8> = (0..100_003u32).map(|i| (i * 7 + i / 251) as u8).collect();
        for window in [None, Some(4096), Some(1 << 20)] {
            let mut b = Recorder {
                arena: vec![0; input.len()],
                window: window.map(|n| vec![0; n]),
                commits: 0,
                uploads: 0,
            };
            let out = b.fill(&mut Bytes(&input, 10_000)).unwrap();
            assert_eq!(out.path, RehydratePath::Engine);
            assert!(b.arena == input, "window {window:?}");
            match window {
                None => assert_eq!((b.uploads, b.commits), (11, 0)),
                Some(n) => assert_eq!((b.uploads, b.commits), (0, input.len().div_ceil(n))),
            }
        }
    }
}
