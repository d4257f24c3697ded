//! Chunks this store handle knows the index holds, and where: the ones its
//! import attempts appended and committed, with the gc epoch those
//! attempts started at. An attempt that starts at the same epoch takes
//! their rows from here instead of querying the index, and still checks
//! that the pack delivers them (the per-attempt `stat` of `heal`, so a
//! damaged pack is healed as before); any other epoch forgets them all.
//!
//! Why it is sound (spec/STORE.md "Index writes"): only gc deletes chunk
//! rows, and it bumps `gc_epoch` in the same transaction. A row committed
//! by an attempt that started at epoch E existed when that attempt
//! committed; if gc deleted anything after E was read, the next attempt
//! reads another epoch and queries afresh; if gc runs during that next
//! attempt, its commit re-checks every reused chunk (the epoch differs),
//! these included. Why it matters: an application run imports the same
//! arena recording after recording, so after the first, most chunk
//! queries are of chunks this process has just committed (a tenth of the
//! calling thread's time on the `large` corpus).

use std::collections::HashMap;

use rrstore_format::chunk::ChunkHash;

use super::Plan;
use crate::pack::ENTRY_HEADER_LEN;

/// At most this many chunks are remembered (about 80 MiB with the table);
/// beyond, the map starts over.
const MAX_KNOWN: usize = 1 << 20;

#[derive(Default)]
pub(crate) struct KnownChunks {
    epoch: Option<i64>,
    /// Chunk -> (index into `packs`, end of its entry in the pack).
    rows: HashMap<ChunkHash, (u32, u64)>,
    packs: Vec<String>,
}

impl KnownChunks {
    /// An attempt starts at `epoch0`: forget everything seen at another.
    pub(crate) fn begin(&mut self, epoch0: i64) {
        if self.epoch != Some(epoch0) {
            self.rows.clear();
            self.packs.clear();
            self.epoch = Some(epoch0);
        }
    }

    /// The pack and entry end of `hash`'s row, if known (valid after
    /// [`KnownChunks::begin`]).
    pub(crate) fn get(&self, hash: &ChunkHash) -> Option<(&str, u64)> {
        let (pack, end) = *self.rows.get(hash)?;
        Some((self.packs.get(pack as usize)?.as_str(), end))
    }

    /// The attempt that started at `epoch0` committed `plan`.
    pub(crate) fn committed(&mut self, epoch0: i64, plan: &Plan) {
        self.begin(epoch0);
        if self.rows.len() + plan.new_chunks.len() > MAX_KNOWN {
            self.rows.clear();
            self.packs.clear();
        }
        for c in &plan.new_chunks {
            let pack = match self.packs.iter().rposition(|p| *p == c.pack) {
                Some(i) => i,
                None => {
                    self.packs.push(c.pack.clone());
                    self.packs.len() - 1
                }
            };
            let end = c.offset + ENTRY_HEADER_LEN as u64 + u64::from(c.stored_len);
            self.rows.insert(c.hash, (pack as u32, end));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::write::ChunkRow;
    use rrstore_format::chunk::Codec;

    fn plan(rows: &[(u8, &str, u64, u32)]) -> Plan {
        Plan {
            new_chunks: rows
                .iter()
                .map(|&(h, pack, offset, stored_len)| ChunkRow {
                    hash: [h; 32],
                    pack: pack.into(),
                    offset,
                    stored_len,
                    len: stored_len,
                    codec: Codec::Raw,
                })
                .collect(),
            ..Plan::default()
        }
    }

    #[test]
    fn rows_are_kept_per_epoch_with_their_entry_ends() {
        let mut k = KnownChunks::default();
        k.begin(3);
        k.committed(3, &plan(&[(1, "aa", 100, 50), (2, "bb", 0, 7)]));
        k.begin(3);
        let end = |o: u64, n: u64| o + ENTRY_HEADER_LEN as u64 + n;
        assert_eq!(k.get(&[1; 32]), Some(("aa", end(100, 50))));
        assert_eq!(k.get(&[2; 32]), Some(("bb", end(0, 7))));
        assert_eq!(k.get(&[9; 32]), None);
        // Another attempt at the same epoch adds to them, sharing packs.
        k.committed(3, &plan(&[(3, "aa", 200, 1)]));
        assert_eq!(k.packs.len(), 2);
        assert_eq!(k.get(&[3; 32]), Some(("aa", end(200, 1))));
        // gc ran: everything is forgotten.
        k.begin(4);
        assert_eq!(k.get(&[1; 32]), None);
        assert!(k.rows.is_empty() && k.packs.is_empty());
        // An attempt that started at an epoch other than the remembered
        // one replaces them.
        k.committed(4, &plan(&[(5, "cc", 0, 1)]));
        k.committed(5, &plan(&[(6, "dd", 0, 1)]));
        assert_eq!(k.get(&[5; 32]), None);
        assert!(k.get(&[6; 32]).is_some());
    }
}
