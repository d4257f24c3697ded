//! Fuzz the exact-integer descriptor parser and the per-generation field
//! readers (native key set via a hash-shaped stem, kernel-named otherwise).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = rrstore_format::llvm::json::parse_descriptor(data);
    let _ = rrstore_format::llvm::parse_fields(data, "1_2");
    let _ = rrstore_format::llvm::parse_fields(data, "kernel");
});
