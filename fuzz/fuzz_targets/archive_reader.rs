//! Fuzz the `.rra` reader: open (header, trailer, checksums, manifest and
//! index decoding and validation), then every read path of every part.
//! Seed corpus: spec/vectors/*.rra
//! (`cargo +nightly fuzz run archive_reader ../spec/vectors`).
#![no_main]

use std::io::Read;

use libfuzzer_sys::fuzz_target;
use rrstore_format::archive::Reader;
use rrstore_format::PartSource;

fuzz_target!(|data: &[u8]| {
    // The reader works on files (positioned reads from several threads).
    let path =
        std::env::temp_dir().join(format!("rrstore-fuzz-archive-{}.rra", std::process::id()));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let Ok(mut r) = Reader::open(&path) else {
        return;
    };
    let rec = r.recording().clone();
    for p in &rec.parts {
        // Repeated chunk references make large parts from small files
        // legitimately (zero-filled arenas); do not allocate those here.
        if p.len > 64 << 20 {
            continue;
        }
        let mut buf = vec![0u8; p.len as usize];
        let ok = r.read_part_into(p.role, &mut buf).is_ok();
        if let Ok(mut s) = r.open_part(p.role) {
            let mut v = Vec::new();
            let streamed = s.read_to_end(&mut v).is_ok();
            // Both read paths verify the part hash: they agree.
            assert_eq!(ok, streamed);
            if ok {
                assert_eq!(v, buf);
            }
        }
        if let Ok(chunks) = r.chunks(p.role) {
            for c in chunks {
                if c.is_err() {
                    break;
                }
            }
        }
    }
});
