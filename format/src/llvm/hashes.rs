//! The two hashes that name a native (LLVM 23+) recording's files:
//! `<KernelHash>_<LaunchConfigHash>`, both xxh3_64 printed in decimal.

use xxhash_rust::xxh3::xxh3_64;

/// The kernel name the hash is taken over: the part after `.content.` if it
/// occurs, else the name without any `.llvm.*` / `.__uniq.*` suffix.
pub fn stable_name(name: &str) -> &str {
    if let Some((_, rest)) = name.split_once(".content.") {
        return rest;
    }
    let mut n = name;
    for marker in [".llvm.", ".__uniq."] {
        if let Some((head, _)) = n.split_once(marker) {
            n = head;
        }
    }
    n
}

/// `KernelHash`: xxh3_64 of [`stable_name`].
pub fn kernel_hash(name: &str) -> u64 {
    xxh3_64(stable_name(name).as_bytes())
}

/// `LaunchConfigHash`: xxh3_64 of (teams, threads, shared memory) as three
/// little-endian u64.
pub fn launch_config_hash(teams: u64, threads: u64, shared_memory: u64) -> u64 {
    let mut b = [0u8; 24];
    b[..8].copy_from_slice(&teams.to_le_bytes());
    b[8..16].copy_from_slice(&threads.to_le_bytes());
    b[16..].copy_from_slice(&shared_memory.to_le_bytes());
    xxh3_64(&b)
}

/// The file stem of a native recording.
pub fn native_stem(name: &str, teams: u64, threads: u64, shared_memory: u64) -> String {
    format!(
        "{}_{}",
        kernel_hash(name),
        launch_config_hash(teams, threads, shared_memory)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_corpus_file_names() {
        // tests/fixtures/upstream-native/saxpy/15370218017841526287_9883226215827474840.*
        assert_eq!(
            native_stem("__omp_offloading_fe00_9ae056_main_l13", 1, 1, 0),
            "15370218017841526287_9883226215827474840"
        );
    }

    #[test]
    fn suffixes_are_stripped_and_content_wins() {
        assert_eq!(stable_name("k.llvm.123"), "k");
        assert_eq!(stable_name("k.__uniq.99.llvm.1"), "k");
        assert_eq!(stable_name("x.content.k.llvm.1"), "k.llvm.1");
        assert_eq!(stable_name("plain"), "plain");
    }
}
