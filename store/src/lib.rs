//! `rrstore-store`: a content-addressed store of kernel recordings.
//!
//! Chunks (blake3-addressed, zstd-compressed) are appended to pack files and
//! deduplicated across all recordings and parts; an embedded SQLite index
//! maps chunks to pack locations and holds the recording metadata that `ls`
//! filters on. The layout and its invariants are written down in
//! spec/STORE.md.
