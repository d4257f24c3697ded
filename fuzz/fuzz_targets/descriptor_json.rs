//! Fuzz the exact-integer descriptor parser with every generation's key set.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = rrstore_format::llvm::json::parse_descriptor(data);
});
