//! The SQLite schema of the store index and its migrations. The schema
//! version is `PRAGMA user_version`; each migration moves it up by one.

/// Highest schema version this build understands.
pub const SCHEMA_VERSION: i64 = 10;

/// Migrations, index i takes the schema from version i to i + 1.
pub const MIGRATIONS: &[&str] = &[
    r#"
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO meta (key, value) VALUES ('gc_epoch', 0);

-- One row per pack file that holds at least one committed chunk.
-- size = length of the pack file up to the end of its last committed entry.
CREATE TABLE packs (
    id   INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    size INTEGER NOT NULL
);

-- Chunk address (blake3 of the uncompressed bytes) -> where its entry is.
CREATE TABLE chunks (
    hash       BLOB PRIMARY KEY,
    pack       INTEGER NOT NULL,
    offset     INTEGER NOT NULL,
    stored_len INTEGER NOT NULL,
    len        INTEGER NOT NULL,
    codec      INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX chunks_pack ON chunks (pack);

-- A part (snapshot, globals table, image, bitcode) by blake3 of its bytes;
-- stored once whatever number of recordings share it.
CREATE TABLE parts (
    hash    BLOB PRIMARY KEY,
    len     INTEGER NOT NULL,
    nchunks INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE part_chunks (
    part  BLOB NOT NULL,
    seq   INTEGER NOT NULL,
    chunk BLOB NOT NULL,
    PRIMARY KEY (part, seq)
) WITHOUT ROWID;
CREATE INDEX part_chunks_chunk ON part_chunks (chunk);

CREATE TABLE recordings (
    id           BLOB PRIMARY KEY,
    id_hex       TEXT NOT NULL UNIQUE,
    kernel       TEXT NOT NULL,
    generation   TEXT NOT NULL,
    target       TEXT NOT NULL,
    arena_base   INTEGER,
    arena_size   INTEGER NOT NULL,
    input_size   INTEGER,
    output_size  INTEGER,
    num_args     INTEGER NOT NULL,
    num_globals  INTEGER NOT NULL,
    logical_size INTEGER NOT NULL,
    image_hash   BLOB,
    imported_at  INTEGER NOT NULL,
    source       TEXT NOT NULL,
    label        TEXT NOT NULL,
    manifest     BLOB NOT NULL
) WITHOUT ROWID;
CREATE INDEX recordings_time ON recordings (imported_at);
CREATE INDEX recordings_kernel ON recordings (kernel);

CREATE TABLE recording_parts (
    recording BLOB NOT NULL,
    role      TEXT NOT NULL,
    part      BLOB NOT NULL,
    PRIMARY KEY (recording, role)
) WITHOUT ROWID;
CREATE INDEX recording_parts_part ON recording_parts (part);

CREATE TABLE tags (
    recording BLOB NOT NULL,
    key       TEXT NOT NULL,
    value     TEXT NOT NULL,
    PRIMARY KEY (recording, key)
) WITHOUT ROWID;
CREATE INDEX tags_kv ON tags (key, value);

CREATE TABLE replay_history (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    recording        BLOB NOT NULL,
    image_hash       BLOB NOT NULL,
    backend          TEXT NOT NULL,
    device           TEXT NOT NULL,
    runtime_versions TEXT NOT NULL,
    started_at       INTEGER NOT NULL,
    wall_ns          INTEGER NOT NULL,
    kernel_ns        TEXT NOT NULL,
    output_blake3    BLOB,
    verdict          TEXT NOT NULL,
    detail           TEXT NOT NULL
);
CREATE INDEX replay_history_recording ON replay_history (recording, started_at);
"#,
    // 1 -> 2: content-addressed images and saved replay outputs (regression
    // workflow, store/src/images.rs and store/src/outputs.rs). Both name a
    // `parts` row, which gc keeps while they do.
    r#"
CREATE TABLE images (
    hash     BLOB PRIMARY KEY,
    hash_hex TEXT NOT NULL UNIQUE,
    len      INTEGER NOT NULL,
    target   TEXT NOT NULL,
    label    TEXT NOT NULL,
    source   TEXT NOT NULL,
    added_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX images_label ON images (label);

CREATE TABLE saved_outputs (
    history_id INTEGER PRIMARY KEY,
    part       BLOB NOT NULL
);
CREATE INDEX saved_outputs_part ON saved_outputs (part);
"#,
    // 2 -> 3: manifests move out of `recordings` so that `ls` scans a
    // compact table.
    r#"
CREATE TABLE manifests (
    id       BLOB PRIMARY KEY,
    manifest BLOB NOT NULL
) WITHOUT ROWID;
INSERT INTO manifests (id, manifest) SELECT id, manifest FROM recordings;
ALTER TABLE recordings DROP COLUMN manifest;
"#,
    HISTORY_LAUNCH_COLUMNS,
    HISTORY_DEVICE_COLUMNS,
    HISTORY_PLACEMENT_COLUMN,
    REPLAY_KEYS_TABLE,
    HISTORY_SHARED_COLUMNS,
    HISTORY_COMPILED_COLUMN,
    RUN_PROFILES_TABLE,
];

/// 3 -> 4: the launch a replay used (store/src/history.rs): the effective
/// team and thread counts (NULL in rows written before) and the overrides
/// that set them (`--num-teams`/`--num-threads`, `OMP_*` in the runner's
/// environment), so `history --changes` can tell a change the thread count
/// caused. Additive only; another migration may be placed before it.
const HISTORY_LAUNCH_COLUMNS: &str = r#"
ALTER TABLE replay_history ADD COLUMN num_teams INTEGER;
ALTER TABLE replay_history ADD COLUMN num_threads INTEGER;
ALTER TABLE replay_history ADD COLUMN launch_overrides TEXT NOT NULL DEFAULT '';
"#;

/// 4 -> 5 (fleet replay, issue 21): which device of the machine a replay
/// ran on, so runs spread over several GPUs can be told apart: the ordinal
/// (NULL in rows written before) and the device's UUID ('' when unknown).
/// The device's name stays in `device`. Additive only; another migration
/// may be placed before it.
const HISTORY_DEVICE_COLUMNS: &str = r#"
ALTER TABLE replay_history ADD COLUMN device_ordinal INTEGER;
ALTER TABLE replay_history ADD COLUMN device_uuid TEXT NOT NULL DEFAULT '';
"#;

/// 5 -> 6: where the replay placed the arena (issue 19,
/// `rrstore_replay::placement`): `recorded 0xADDR` or `relocated 0xADDR
/// (...)`; empty in rows written before, and when the replay stopped
/// before the arena was placed. Additive only.
const HISTORY_PLACEMENT_COLUMN: &str = r#"
ALTER TABLE replay_history ADD COLUMN placement TEXT NOT NULL DEFAULT '';
"#;

/// 6 -> 7: the settings a replay of the regression commands ran with,
/// beyond the launch (backend, device, verification, tolerance,
/// repetitions, timeout, sandbox, placement: `rrstore_replay::regress::run`),
/// as one text key per history row, so the replay cache reuses a row only
/// for a replay that would get the same result. Rows without one (other
/// replays, rows written before) are never reused. A table of its own
/// rather than a `replay_history` column: only the cache reads it.
/// Additive only.
const REPLAY_KEYS_TABLE: &str = r#"
CREATE TABLE replay_keys (
    history_id INTEGER PRIMARY KEY,
    key        TEXT NOT NULL
);
"#;

/// 7 -> 8 (shared history, spec/REMOTE.md "Shared history"): the machine
/// a replay ran on (`RRSTORE_MACHINE`, else the host name; '' in rows
/// written before: "this store, before machines were recorded") and the
/// row's identity, 16 random bytes as 32 hex digits, given to every old
/// row here and to each new row at append, kept by every copy of the row
/// (push, pull), so merging the same row twice adds it once.
const HISTORY_SHARED_COLUMNS: &str = r#"
ALTER TABLE replay_history ADD COLUMN machine TEXT NOT NULL DEFAULT '';
ALTER TABLE replay_history ADD COLUMN uid TEXT;
UPDATE replay_history SET uid = lower(hex(randomblob(16)));
CREATE UNIQUE INDEX replay_history_uid ON replay_history (uid);
"#;

/// 8 -> 9 (issue 41): how the image a replay ran was compiled from LLVM
/// IR (`rrstore_store::history_compiled::Compilation` as JSON: IR hash,
/// compiler path, `--version` line and hash, flags, target, cached); NULL
/// for a native image and in rows written before. Additive only.
const HISTORY_COMPILED_COLUMN: &str = r#"
ALTER TABLE replay_history ADD COLUMN compiled TEXT;
"#;

/// 9 -> 10 (issue 44): what a differing run's replays showed (the bytes
/// that varied between them, those that differed from the recording alike
/// in each, with their values; `rrstore_replay::verify::profile`), so that
/// `check` compares runs of a kernel whose output varies byte by byte
/// outside everything that ever varied. Opaque to the store; by recording
/// too, for the union of a recording's varying bytes. Additive only.
const RUN_PROFILES_TABLE: &str = r#"
CREATE TABLE run_profiles (
    history_id INTEGER PRIMARY KEY,
    recording  BLOB NOT NULL,
    profile    BLOB NOT NULL
);
CREATE INDEX run_profiles_recording ON run_profiles (recording, history_id);
"#;
