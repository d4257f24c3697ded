//! Fuzz the offload binary reader (format/src/offload): a file that is an
//! offload binary or an ELF with `.llvm.offloading` sections. Every entry
//! it accepts must lie inside the input. Seed corpus:
//! tests/fixtures/offload/packaged.offbin.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(found)) = rrstore_format::offload::container::find(data) {
        for e in &found.entries {
            assert!(e.image.start <= e.image.end && e.image.end <= data.len() as u64);
            let _ = rrstore_format::offload::target::of_entry(e, e.image_bytes(data));
        }
    }
});
