//! This machine as the store and remotes spell it in temporary file names
//! (spec/REMOTE.md): tests look for, or plant, such files.

/// The hostname with every character but ASCII letters, digits and `-`
/// replaced by `_`.
pub fn temp_name_host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_else(|e| panic!("/proc/sys/kernel/hostname: {e}"))
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
