//! Layout version 3 (spec/REMOTE.md, "Version 3"): chunks, tree nodes
//! and part objects as blobs in pack objects, found through index objects.
//!
//! * [`layout`]: pack and index object keys, the "RRX3" index encoding,
//!   the layout marker (its items are re-exported here: `v3::pack_key`,
//!   `v3::Kind`, ...); `fanout_index`: the "RRX4" index encoding.
//! * `manifest`: the "RRM3" manifest encoding (a fixed zstd dictionary).
//! * `index_cache`: the local copy of a remote's index objects;
//!   `cold_lookup`: looking blobs up in index objects not cached yet.
//! * `push`: a push to a version 3 remote (packs, then an index object).

pub(super) mod cold_lookup;
mod fanout_index;
pub(super) mod index_cache;
pub mod layout;
pub(super) mod manifest;
pub(super) mod push;

pub use layout::{
    decode_index, encode_index, encode_index_for, encode_index_v3, index_key, index_of_key,
    pack_key, Entry, Kind, INDEX, INDEX_MAX, MARKER, MARKER_BODY, MAX_EXPANSION, PACKS,
};
