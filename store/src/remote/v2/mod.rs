//! Layout version 2 (spec/REMOTE.md): every chunk, tree node and part
//! object an object of its own.
//!
//! * [`layout`]: the object keys and encodings of version 2 (version 1
//!   objects are still read). Version 3 keeps these encodings: its blobs
//!   are version 2 chunks, nodes and part objects, and its manifests and
//!   image entries are these with a newer version number.
//! * `push`: a push to a version 2 remote (one object per blob).

pub mod layout;
pub(super) mod push;
