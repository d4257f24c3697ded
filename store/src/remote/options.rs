//! What the caller sets for a remote it opens, beyond the remote's own
//! configuration (`remotes.json`): request tracing and the test hooks.
//! The CLI fills them from its environment (`cli/src/flags/env.rs`); the
//! library reads no `RRSTORE_*` variable.

/// Settings of an open [`Remote`](super::Remote) (all off by default).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RemoteOptions {
    /// Write every request to stderr as it ends (`trace`;
    /// docs/remote.md, "Tracing requests").
    pub trace: bool,
    /// Test hook: close version 3 packs at this many bytes instead of the
    /// configured pack size (so small recordings make several packs).
    pub pack_bytes: Option<u64>,
    /// Test hook: a push to an empty version 2 remote stays version 2
    /// (instead of writing the version 3 marker first).
    pub keep_layout_2: bool,
    /// Test hook: write index objects in the older "RRX3" form (to test
    /// that remotes holding it stay readable).
    pub index_rrx3: bool,
    /// Test hooks that stop a transfer at a known point, for tests that
    /// kill it there.
    pub hooks: TransferHooks,
}

/// Points where a push or pull announces itself on stderr and then waits
/// until it is killed, and the pull's batch size (docs/remote.md).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TransferHooks {
    /// Index pulled chunks after this many bytes instead of the default.
    pub pull_batch_bytes: Option<u64>,
    /// Pause once this many chunk batches of a pull are committed.
    pub pull_pause_after_batches: Option<u64>,
    /// Pause once this many recordings of a pull are committed.
    pub pull_pause_after_recordings: Option<u64>,
    /// Pause a version 3 push once it holds its shared lock.
    pub push_pause_after_lock: bool,
}
