//! The rows of a recording (`recordings`, `manifests`, `recording_parts`):
//! the keeping row an import or pull commits through
//! [`super::write::commit`], and that `repair` restores from recovery
//! metadata, so all of them write exactly the rows `ls`, `show` and gc read.

use rrstore_format::{Recording, RecordingId};

use super::i;

/// Insert a recording's index rows (`recordings`, `manifests`,
/// `recording_parts`) inside the caller's transaction, after its parts are
/// indexed. Recovery metadata is not written here: an import writes it after
/// the commit, `repair` restores rows from it.
pub(crate) fn insert_recording_rows(
    tx: &rusqlite::Transaction,
    id: &RecordingId,
    rec: &Recording,
    manifest: &[u8],
    source: &str,
    label: &str,
    imported_at: i64,
) -> rusqlite::Result<()> {
    use rrstore_format::PartRole;
    let input = rec.part(PartRole::Input).map(|p| i(p.len));
    let output = rec.part(PartRole::Output).map(|p| i(p.len));
    let image = rec.part(PartRole::Image).map(|p| p.blake3.to_vec());
    tx.execute(
        "INSERT INTO recordings (id, id_hex, kernel, generation, target, arena_base, \
         arena_size, input_size, output_size, num_args, num_globals, logical_size, \
         image_hash, imported_at, source, label) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
        rusqlite::params![
            &id.0[..],
            id.to_hex(),
            rec.kernel,
            rec.generation.as_str(),
            rec.image_target.short_name(),
            rec.arena.base.map(i),
            i(rec.arena.size),
            input,
            output,
            rec.args.len() as i64,
            rec.globals.len() as i64,
            i(rec.logical_size()),
            image,
            imported_at,
            source,
            label,
        ],
    )?;
    tx.execute(
        "INSERT INTO manifests (id, manifest) VALUES (?1, ?2)",
        rusqlite::params![&id.0[..], manifest],
    )?;
    let mut rp_ins = tx.prepare_cached(
        "INSERT INTO recording_parts (recording, role, part) VALUES (?1, ?2, ?3)",
    )?;
    for p in &rec.parts {
        rp_ins.execute(rusqlite::params![&id.0[..], p.role.as_str(), &p.blake3[..]])?;
    }
    Ok(())
}
