//! The `.rra` single-file archive, version 1 (spec/FORMAT.md).
//!
//! One file holds one recording: a header (magic, version), the chunk
//! payloads (FastCDC chunks, each zstd-compressed or raw, each distinct
//! chunk stored once), then a MessagePack manifest (the [`Recording`] and the
//! settings) and index (chunk table and each part's chunk list), and a
//! fixed-size trailer giving their offsets, lengths and blake3 checksums.
//! The writer streams (header first, manifest last); the reader can decode
//! any one part without touching the others.
//!
//! * [`layout`]: the byte layout (constants, header, trailer, manifest, index).
//! * [`writer`]: [`write()`] / [`write_path`], a pipelined streaming writer.
//! * [`reader`]: [`Reader`], validated on open; [`serve`]: its parts, as a
//!   [`crate::PartSource`] and chunk by chunk ([`Chunks`]).
//! * [`decode`]: verified chunk decoding and the decode-ahead part stream.
//! * [`scan`]: parallel FastCDC + chunk and stream blake3 in one read, on a
//!   [`pool`] of workers that also compress (shared with the store importer);
//!   [`memo`] spares blocks seen before the cutting and chunk hashing.
//!
//! [`Recording`]: crate::Recording

mod checks;
pub mod decode;
pub mod layout;
pub mod memo;
pub mod pool;
pub mod reader;
pub mod scan;
pub mod serve;
pub mod writer;

pub use reader::{ChunkInfo, Reader, StoredChunk};
pub use serve::Chunks;
pub use writer::{
    write, write_path, write_path_unhashed, write_unhashed, WriteOptions, WriteStats, LEVELS,
};

/// File name extension of archives.
pub const EXTENSION: &str = "rra";
