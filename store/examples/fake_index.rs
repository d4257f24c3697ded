//! Write index objects for N fake chunks (no pack data) into a file://
//! remote directory, and its layout marker, so that bench/remote.sh can
//! measure a push to a remote of a million chunks.
//!
//! usage: fake_index DIR N

use rrstore_store::remote::v3::{self, Entry, Kind};

fn main() -> Result<(), String> {
    let args: Vec<String> = std::env::args().collect();
    let (dir, n) = match args.as_slice() {
        [_, d, n] => (
            std::path::PathBuf::from(d),
            n.parse::<u64>().map_err(|e| e.to_string())?,
        ),
        _ => return Err("usage: fake_index DIR N".into()),
    };
    std::fs::create_dir_all(dir.join("index")).map_err(|e| e.to_string())?;
    std::fs::write(dir.join(v3::MARKER), v3::MARKER_BODY).map_err(|e| e.to_string())?;
    let per_object = 200_000u64;
    let mut i = 0u64;
    while i < n {
        let end = (i + per_object).min(n);
        let entries: Vec<Entry> = (i..end)
            .map(|k| Entry {
                kind: Kind::Chunk,
                name: *blake3::hash(&k.to_le_bytes()).as_bytes(),
                pack: *blake3::hash(&(k / 500).to_le_bytes()).as_bytes(),
                offset: (k % 500) * 40_000,
                len: 40_000,
            })
            .collect();
        let (name, body) = v3::encode_index(&entries)?;
        std::fs::write(dir.join(v3::index_key(&name)), body).map_err(|e| e.to_string())?;
        i = end;
    }
    println!(
        "{n} fake chunks in {} index objects",
        n.div_ceil(per_object)
    );
    Ok(())
}
