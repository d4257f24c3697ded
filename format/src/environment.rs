//! The launch environment stored with a recording (issue 44): the OpenMP
//! settings that decide a host kernel's result (team and thread counts,
//! schedule, dynamic adjustment, reduction method), which `rrstore
//! record` reads from the environment the program runs in and a replay
//! applies by default.
//!
//! Only variables [`is_launch_setting`] accepts are stored or applied: an
//! environment read from an archive or a store is user input, and a
//! replay puts it into the runner's environment, so anything else
//! (`LD_PRELOAD`, a secret) is refused by [`crate::validate`].

/// Whole names of the OpenMP runtime's result-deciding settings that do
/// not start with `OMP_` (LLVM's `KMP_*` equivalents).
const KMP_SETTINGS: &[&str] = &[
    "KMP_DETERMINISTIC_REDUCTION",
    "KMP_FORCE_REDUCTION",
    "KMP_TEAMS_THREAD_LIMIT",
    "KMP_DEVICE_THREAD_LIMIT",
    "KMP_ALL_THREADS",
    "KMP_DYNAMIC_MODE",
    "KMP_SCHEDULE",
];

/// `OMP_*` variables that only report or attach tools: they change no
/// result, and a tool path names a file of the recording machine.
const OMP_IGNORED: &[&str] = &[
    "OMP_DISPLAY_ENV",
    "OMP_DISPLAY_AFFINITY",
    "OMP_AFFINITY_FORMAT",
    "OMP_TOOL",
    "OMP_TOOL_LIBRARIES",
    "OMP_TOOL_VERBOSE_INIT",
    "OMP_DEBUG",
];

/// Words that mark a variable as a secret (never stored).
const SECRET_WORDS: &[&str] = &["SECRET", "TOKEN", "PASSWORD", "CREDENTIAL", "KEY", "AUTH"];

/// Whether `name` is a launch setting a recording stores: `OMP_*` (but
/// [`OMP_IGNORED`]) and a few `KMP_*`, never one whose name says it holds a
/// secret.
pub fn is_launch_setting(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    let known =
        (name.starts_with("OMP_") && !OMP_IGNORED.contains(&name)) || KMP_SETTINGS.contains(&name);
    known
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !SECRET_WORDS.iter().any(|w| upper.contains(w))
}

/// Longest value stored (an `OMP_PLACES` list is the longest in use).
pub const MAX_VALUE: usize = 4096;

/// The launch settings among `vars` (a process environment), sorted by
/// name: what `rrstore record` stores. Values that are not UTF-8, hold a
/// NUL or are longer than [`MAX_VALUE`] are left out.
pub fn capture<I, K, V>(vars: I) -> Vec<(String, String)>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<std::ffi::OsStr>,
    V: AsRef<std::ffi::OsStr>,
{
    let mut out: Vec<(String, String)> = vars
        .into_iter()
        .filter_map(|(k, v)| {
            let k = k.as_ref().to_str()?.to_string();
            let v = v.as_ref().to_str()?.to_string();
            (is_launch_setting(&k) && valid_value(&v)).then_some((k, v))
        })
        .collect();
    out.sort();
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

/// Whether `v` can be stored and passed to a runner.
pub fn valid_value(v: &str) -> bool {
    v.len() <= MAX_VALUE && !v.contains('\0')
}

/// What is wrong with a stored environment, if anything: a name that is
/// not a launch setting, a bad value, names out of order or repeated.
pub fn check(env: &[(String, String)]) -> Option<String> {
    for (k, v) in env {
        if !is_launch_setting(k) {
            return Some(format!("`{k}` is not an OpenMP launch setting"));
        }
        if !valid_value(v) {
            return Some(format!(
                "the value of `{k}` holds a NUL byte or is longer than {MAX_VALUE} bytes"
            ));
        }
    }
    if env.windows(2).any(|w| w[0].0 >= w[1].0) {
        return Some("its names are not sorted, or one is repeated".into());
    }
    None
}

/// `NAME=value NAME=value`, for people.
pub fn text(env: &[(String, String)]) -> String {
    env.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_launch_settings_are_captured_sorted() {
        let env = capture([
            ("PATH", "/bin"),
            ("OMP_SCHEDULE", "dynamic,4"),
            ("LD_PRELOAD", "/tmp/x.so"),
            ("OMP_NUM_THREADS", "2"),
            ("OMP_DISPLAY_ENV", "true"),
            ("OMP_PASSWORD", "hunter2"),
            ("KMP_DETERMINISTIC_REDUCTION", "1"),
            ("KMP_BLOCKTIME", "0"),
        ]);
        assert_eq!(
            env,
            vec![
                ("KMP_DETERMINISTIC_REDUCTION".into(), "1".into()),
                ("OMP_NUM_THREADS".into(), "2".into()),
                ("OMP_SCHEDULE".into(), "dynamic,4".into()),
            ]
        );
        assert_eq!(check(&env), None);
        assert_eq!(text(&env[1..]), "OMP_NUM_THREADS=2 OMP_SCHEDULE=dynamic,4");
    }

    #[test]
    fn a_forged_environment_is_refused() {
        let bad = |k: &str, v: &str| check(&[(k.to_string(), v.to_string())]);
        assert!(bad("LD_PRELOAD", "/tmp/evil.so").is_some());
        assert!(bad("OMP_TOOL_LIBRARIES", "/tmp/evil.so").is_some());
        assert!(bad("OMP_NUM_THREADS=1 LD_PRELOAD", "x").is_some());
        assert!(bad("OMP_NUM_THREADS", "2\u{0}").is_some());
        let unsorted = vec![
            ("OMP_SCHEDULE".to_string(), "static".to_string()),
            ("OMP_NUM_THREADS".to_string(), "2".to_string()),
        ];
        assert!(check(&unsorted).is_some());
    }
}
