//! Fuzz the LLVM 18-22 globals table parser (`name\0`, u32 size, data).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = rrstore_format::llvm::globals::parse_kernel_named(data, data.len() as u64);
});
