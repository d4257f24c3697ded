//! Which LLVM generation wrote a descriptor, from its keys (and, when the
//! keys say nothing, from the file name).

use super::json::Descriptor;
use crate::model::Generation;

/// Keys only the native (LLVM 23+) layout writes.
const NATIVE_KEYS: [&str; 5] = [
    "VAllocAddr",
    "VAllocSize",
    "NumTeams",
    "NumThreads",
    "TeamsLimits",
];

/// Keys only the kernel-named layouts (LLVM 16-22) write.
const KERNEL_NAMED_KEYS: [&str; 3] = ["NumTeamsClause", "ThreadLimitClause", "DeviceMemorySize"];

/// Whether a file stem has the native `<u64>_<u64>` shape.
pub fn is_hash_stem(stem: &str) -> bool {
    parse_hash_stem(stem).is_some()
}

/// The two decimal hashes of a `<KernelHash>_<LaunchConfigHash>` stem.
pub fn parse_hash_stem(stem: &str) -> Option<(u64, u64)> {
    let (a, b) = stem.split_once('_')?;
    let dec = |s: &str| {
        (!s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()))
            .then(|| s.parse::<u64>().ok())
            .flatten()
    };
    Some((dec(a)?, dec(b)?))
}

/// The generation, or a message saying why none fits.
pub fn generation(desc: &Descriptor, stem: &str) -> Result<Generation, String> {
    let native = NATIVE_KEYS.iter().any(|k| desc.has(k));
    let named = KERNEL_NAMED_KEYS.iter().any(|k| desc.has(k));
    match (native, named) {
        (true, false) => Ok(Generation::Native),
        (false, true) if desc.has("BumpAllocVAStart") => Ok(Generation::KernelNamed),
        (false, true) => Ok(Generation::KernelNamedLegacy),
        (true, true) => Err(format!(
            "the descriptor mixes native keys ({}) with kernel-named keys ({}); expected one LLVM generation's key set",
            NATIVE_KEYS.join(" "),
            KERNEL_NAMED_KEYS.join(" ")
        )),
        (false, false) if is_hash_stem(stem) => Ok(Generation::Native),
        (false, false) => Err(format!(
            "not an LLVM record-replay descriptor: none of the keys {} or {} is present",
            KERNEL_NAMED_KEYS.join(" "),
            NATIVE_KEYS.join(" ")
        )),
    }
}
