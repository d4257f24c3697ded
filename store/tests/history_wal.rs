//! Replay history rows on a real SQLite index: each replay is a new process,
//! i.e. a first connection that rebuilds the write-ahead-log index and
//! cannot restart a log left behind. Appending many rows, each from a fresh
//! `Store::open`, must keep the log bounded (it is checkpointed and
//! truncated every few rows: before a replay when the caller folds it then,
//! as `rrstore replay` does, else after a row) and lose no row.

use rrstore_format::RecordingId;
use rrstore_store::{HistoryEntry, Store};

fn entry(n: u8) -> HistoryEntry {
    HistoryEntry {
        id: 0,
        recording: RecordingId([n; 32]),
        image_hash: [7; 32],
        backend: "host".into(),
        device: "host x86_64: test CPU".into(),
        runtime_versions: "/usr/lib/llvm-22/lib/libomptarget.so.22.1".into(),
        started_at: 1_700_000_000 + i64::from(n),
        wall_ns: 25_000_000,
        kernel_ns: vec![1_000_000, 900_000],
        output_blake3: Some([n; 32]),
        verdict: "verified".into(),
        detail: "x".repeat(600),
        num_teams: Some(1),
        num_threads: Some(1),
        launch_overrides: String::new(),
        device_ordinal: Some(0),
        device_uuid: String::new(),
        placement: String::new(),
        machine: String::new(),
        uid: String::new(),
        compiled: None,
    }
}

/// A new store in a temporary directory: (the directory's guard, the
/// store's directory, the index's write-ahead log).
fn new_store() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    drop(Store::open(&dir).unwrap());
    let wal = dir.join("index.sqlite-wal");
    (tmp, dir, wal)
}

#[test]
fn many_replays_keep_the_write_ahead_log_bounded() {
    let (_tmp, dir, wal) = new_store();
    let mut largest = 0;
    for n in 0..120u8 {
        let store = Store::open(&dir).unwrap();
        store.append_history(&entry(n)).unwrap();
        drop(store);
        largest = largest.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
    }
    // 64 pages before the truncating checkpoint, plus one commit's frames.
    assert!(largest < 80 * 4120, "the log grew to {largest} bytes");
    let store = Store::open(&dir).unwrap();
    let rows = store.history(None).unwrap();
    assert_eq!(rows.len(), 120);
    assert_eq!(rows[119].recording, RecordingId([119; 32]));
    assert_eq!(rows[5].detail.len(), 600);
}

#[test]
fn replays_that_fold_first_keep_the_log_small_and_append_without_a_checkpoint() {
    let (_tmp, dir, wal) = new_store();
    let len = || std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
    let (mut largest, mut folds) = (0, 0);
    for n in 0..120u8 {
        let store = Store::open(&dir).unwrap();
        let before = len();
        store.fold_history_log();
        if len() < before {
            // A fold empties the log and starts the next one with a single
            // commit of one page (the fold count).
            assert!(
                len() > 0 && len() <= 32 + 2 * 4120,
                "{} bytes after a fold",
                len()
            );
            folds += 1;
        }
        let folded = len();
        store.append_history(&entry(n)).unwrap();
        // The row only adds to the log: no checkpoint after it.
        assert!(
            len() > folded,
            "row {n}: the log went from {folded} to {} bytes",
            len()
        );
        drop(store);
        largest = largest.max(len());
    }
    // 32 pages before the truncating checkpoint, plus one commit's frames.
    assert!(largest < 48 * 4120, "the log grew to {largest} bytes");
    assert!(folds >= 8, "only {folds} folds in 120 replays");
    let store = Store::open(&dir).unwrap();
    assert_eq!(store.history_log_folds().unwrap(), folds);
    let rows = store.history(None).unwrap();
    assert_eq!(rows.len(), 120);
    assert_eq!(rows[119].recording, RecordingId([119; 32]));
}
