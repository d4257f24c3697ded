//! What a spare runner loads before it knows its recording: the OpenMP
//! offload runtime, whose `dlopen` (libomptarget, libLLVM: ~10 ms of
//! relocations) is most of a small replay's wall time. Started as soon as
//! the spare is forked, it overlaps everything the parent does before the
//! image is known (parsing arguments, opening the store, reading the
//! manifest and the image).
//!
//! The arena is not mapped yet while this loads, so a library can land in
//! the range the recording needs. Two checks keep the guarantees of a
//! runner that reserves first:
//! * a spare serves only an image that needs every library it preloaded
//!   ([`compatible`]; checked by the runner at `Reserve`), so an image
//!   built against another runtime never shares a process with this one;
//! * when the range is occupied in the spare, the backend drops it and
//!   reserves in a runner that maps the arena before loading anything.
//!
//! Which runtime ([`Preload::Auto`]): the newest `libomptarget.so.N` in the
//! first directory that has one, searched the way the dynamic loader
//! searches for an image's dependencies (`LD_LIBRARY_PATH`, then the
//! system library directories).

use std::ffi::CString;
use std::path::Path;
use std::thread::JoinHandle;

/// What a spare runner loads before its arena is known.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Preload {
    /// Nothing: the spare waits for its arena like any runner.
    Off,
    /// The offload runtime found as described in the module documentation.
    #[default]
    Auto,
    /// These libraries (sonames or paths), in order.
    Libraries(Vec<String>),
}

/// System library directories of x86-64 Linux distributions, after
/// `LD_LIBRARY_PATH` (Debian multiarch, then Fedora's and the plain ones).
const SYSTEM_DIRS: &[&str] = &[
    "/usr/local/lib",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
];

impl Preload {
    /// Parse `RRSTORE_HOST_PRELOAD`'s syntax: `auto` (or empty), `off`, or
    /// a colon-separated list of libraries.
    pub fn parse(spec: &str) -> Preload {
        match spec.trim() {
            "" | "auto" => Preload::Auto,
            "off" | "none" => Preload::Off,
            list => Preload::Libraries(
                list.split(':')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect(),
            ),
        }
    }

    /// The libraries to load (for `Auto`, searched now; none when no
    /// runtime is found).
    pub fn libraries(&self) -> Vec<String> {
        match self {
            Preload::Off => Vec::new(),
            Preload::Libraries(l) => l.clone(),
            Preload::Auto => {
                let from_env = std::env::var_os("LD_LIBRARY_PATH").unwrap_or_default();
                let env_dirs = std::env::split_paths(&from_env);
                let dirs = env_dirs.chain(SYSTEM_DIRS.iter().map(Into::into));
                dirs.filter(|d| !d.as_os_str().is_empty())
                    .find_map(|d| newest_runtime_in(&d))
                    .into_iter()
                    .collect()
            }
        }
    }
}

/// The file name of the newest `libomptarget.so.<version>` in `dir`.
pub fn newest_runtime_in(dir: &Path) -> Option<String> {
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter_map(|name| {
            let version = name.strip_prefix("libomptarget.so.")?;
            let key = version_key(version)?;
            Some((key, name))
        })
        .max()
        .map(|(_, name)| name)
}

/// `22.1` -> `[22, 1]`; `None` unless it starts with a number.
fn version_key(version: &str) -> Option<Vec<u64>> {
    let key: Vec<u64> = version.split('.').map_while(|p| p.parse().ok()).collect();
    (!key.is_empty()).then_some(key)
}

/// Whether an image whose `DT_NEEDED` entries are `needed` may run in a
/// runner that preloaded `preloaded`: each preloaded library (by file name,
/// which is its soname for the runtime [`Preload::Auto`] finds) must be one
/// the image needs itself.
pub fn compatible(preloaded: &[String], needed: &[String]) -> bool {
    preloaded.iter().all(|lib| {
        let file = lib.rsplit('/').next().unwrap_or(lib);
        needed.iter().any(|n| n == file)
    })
}

/// Start loading `libs` on a thread of this (runner) process. Its outcome
/// does not matter: a library that failed to load here fails the image's
/// own `dlopen`, which says why. Join it before loading the image.
pub fn start(libs: &[String]) -> Option<JoinHandle<()>> {
    let libs: Vec<CString> = libs
        .iter()
        .filter_map(|l| CString::new(l.as_str()).ok())
        .collect();
    if libs.is_empty() {
        return None;
    }
    std::thread::Builder::new()
        .name("preload".into())
        .spawn(move || {
            for lib in &libs {
                // SAFETY: loading the OpenMP runtime into the runner (the
                // process that exists to run it); `lib` is a C string. The
                // handle is kept loaded for the image's own dlopen.
                let _ = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
            }
        })
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_environment_syntax() {
        assert_eq!(Preload::parse(""), Preload::Auto);
        assert_eq!(Preload::parse("auto"), Preload::Auto);
        assert_eq!(Preload::parse("off"), Preload::Off);
        assert_eq!(
            Preload::parse("libomptarget.so.20.1:/opt/x/libfoo.so"),
            Preload::Libraries(vec![
                "libomptarget.so.20.1".into(),
                "/opt/x/libfoo.so".into()
            ])
        );
        assert!(Preload::Off.libraries().is_empty());
    }

    #[test]
    fn finds_the_newest_runtime_in_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        for f in [
            "libomptarget.so.9.0",
            "libomptarget.so.20.1",
            "libomptarget.so.19.1",
            "libomptarget.so",
            "libomptarget.so.x",
            "libomp.so.5",
        ] {
            std::fs::write(dir.path().join(f), b"").unwrap();
        }
        assert_eq!(
            newest_runtime_in(dir.path()).as_deref(),
            Some("libomptarget.so.20.1")
        );
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(newest_runtime_in(empty.path()), None);
        assert_eq!(newest_runtime_in(&empty.path().join("gone")), None);
    }

    #[test]
    fn a_runner_serves_only_images_that_need_what_it_preloaded() {
        let needed: Vec<String> = ["libomp.so.5", "libomptarget.so.22.1", "libc.so.6"]
            .map(String::from)
            .into();
        assert!(compatible(&[], &needed));
        assert!(compatible(&["libomptarget.so.22.1".into()], &needed));
        assert!(compatible(
            &["/usr/lib/llvm-22/lib/libomptarget.so.22.1".into()],
            &needed
        ));
        assert!(!compatible(&["libomptarget.so.20.1".into()], &needed));
        assert!(!compatible(&["libomptarget.so.22.1".into()], &[]));
    }
}
