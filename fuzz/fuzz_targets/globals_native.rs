//! Fuzz the native (LLVM 23+) globals table parser (u32 count, entries).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = rrstore_format::llvm::globals::parse_native(data, data.len() as u64);
});
