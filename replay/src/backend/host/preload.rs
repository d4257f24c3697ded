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
//!   ([`compatible`]; checked by the runner at `Reserve`) and names no
//!   library search path of its own (`DT_RPATH`/`DT_RUNPATH`, through
//!   which the loader could find another file of the same soname), so an
//!   image never runs with another runtime than it would have loaded;
//! * when the range is occupied in the spare, the backend drops it and
//!   reserves in a runner that maps the arena before loading anything.
//!
//! Which runtime ([`Preload::Auto`]): the newest `libomptarget.so.N` where
//! the dynamic loader looks for an image's dependencies: the first
//! `LD_LIBRARY_PATH` directory that has one, else the loader's cache
//! (`/etc/ld.so.cache`, what `ldconfig -p` lists: one 30 KiB read, where
//! listing `/usr/lib/x86_64-linux-gnu` costs ~0.5 ms on the replay's
//! critical path), else the system library directories, else (by full
//! path) the newest in a versioned LLVM directory (`/usr/lib/llvm-N/lib`,
//! see [`super::libraries`]).

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
pub(super) const SYSTEM_DIRS: &[&str] = &[
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
                std::env::split_paths(&from_env)
                    .filter(|d| !d.as_os_str().is_empty())
                    .find_map(|d| newest_runtime_in(&d))
                    .or_else(|| {
                        let cache = std::fs::read(LOADER_CACHE).ok()?;
                        newest_runtime_in_cache(&cache)
                    })
                    .or_else(|| {
                        SYSTEM_DIRS
                            .iter()
                            .find_map(|d| newest_runtime_in(Path::new(d)))
                    })
                    .or_else(|| {
                        // Not in the loader's path: by full path (the
                        // soname is its file name, as `compatible` wants).
                        super::libraries::installed()
                            .into_iter()
                            .next()
                            .map(|r| r.dir.join(r.soname).to_string_lossy().into_owned())
                    })
                    .into_iter()
                    .collect()
            }
        }
    }
}

/// The dynamic loader's cache of sonames and paths (`ldconfig`).
const LOADER_CACHE: &str = "/etc/ld.so.cache";

/// The newest `libomptarget.so.<version>` soname among the x86-64 entries
/// of a loader cache in glibc's format ("glibc-ld.so.cache1.1", alone or
/// after the old "ld.so-1.7.0" table). `None` for anything else.
pub fn newest_runtime_in_cache(cache: &[u8]) -> Option<String> {
    const OLD_MAGIC: &[u8] = b"ld.so-1.7.0";
    const NEW_MAGIC: &[u8] = b"glibc-ld.so.cache1.1";
    const HEADER: usize = 48;
    const ENTRY: usize = 24;
    // x86-64 libc6 entries (glibc's FLAG_ELF_LIBC6 | FLAG_X8664_LIB64).
    const X86_64: u32 = 0x0303;
    let u32_at = |b: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let new = if cache.starts_with(OLD_MAGIC) {
        // The old table: magic (padded to 12), count, 12-byte entries; the
        // new table follows at the next 8-byte boundary.
        let n = u32_at(cache, 12)? as usize;
        let end = 16usize.checked_add(n.checked_mul(12)?)?;
        cache.get(end.next_multiple_of(8)..)?
    } else {
        cache
    };
    if !new.starts_with(NEW_MAGIC) {
        return None;
    }
    let n = u32_at(new, 20)? as usize;
    let string = |off: u32| -> Option<&str> {
        let s = new.get(off as usize..)?;
        let len = s.iter().position(|&b| b == 0)?;
        std::str::from_utf8(&s[..len]).ok()
    };
    (0..n)
        .filter_map(|i| {
            let at = HEADER.checked_add(i.checked_mul(ENTRY)?)?;
            if u32_at(new, at)? != X86_64 {
                return None;
            }
            let name = string(u32_at(new, at + 4)?)?;
            let key = version_key(name.strip_prefix("libomptarget.so.")?)?;
            Some((key, name.to_string()))
        })
        .max()
        .map(|(_, name)| name)
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
pub(super) fn version_key(version: &str) -> Option<Vec<u64>> {
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

    /// A loader cache in glibc's format with `(flags, soname, path)`
    /// entries, after the old table when `old` says how many entries it
    /// has.
    fn loader_cache(entries: &[(u32, &str, &str)], old: Option<u32>) -> Vec<u8> {
        let mut strings = Vec::new();
        let mut table = Vec::new();
        let base = 48 + 24 * entries.len();
        for (flags, key, value) in entries {
            let k = base + strings.len();
            strings.extend_from_slice(key.as_bytes());
            strings.push(0);
            let v = base + strings.len();
            strings.extend_from_slice(value.as_bytes());
            strings.push(0);
            table.extend_from_slice(&flags.to_le_bytes());
            table.extend_from_slice(&(k as u32).to_le_bytes());
            table.extend_from_slice(&(v as u32).to_le_bytes());
            table.extend_from_slice(&[0; 12]);
        }
        let mut new = b"glibc-ld.so.cache1.1".to_vec();
        new.extend_from_slice(&(entries.len() as u32).to_le_bytes());
        new.extend_from_slice(&(strings.len() as u32).to_le_bytes());
        new.extend_from_slice(&[0; 20]);
        new.extend_from_slice(&table);
        new.extend_from_slice(&strings);
        let Some(n) = old else { return new };
        let mut file = b"ld.so-1.7.0\0".to_vec();
        file.extend_from_slice(&n.to_le_bytes());
        file.resize((16 + 12 * n as usize).next_multiple_of(8), 0);
        file.extend_from_slice(&new);
        file
    }

    #[test]
    fn finds_the_newest_runtime_in_the_loader_cache() {
        let entries = [
            (0x0303, "libz.so.1", "/lib/x86_64-linux-gnu/libz.so.1"),
            (
                0x0303,
                "libomptarget.so.19.1",
                "/usr/lib/llvm-19/lib/libomptarget.so.19.1",
            ),
            (
                0x0303,
                "libomptarget.so.22.1",
                "/lib/x86_64-linux-gnu/libomptarget.so.22.1",
            ),
            // A 32-bit entry is not this process' runtime.
            (
                0x0003,
                "libomptarget.so.23.1",
                "/usr/lib32/libomptarget.so.23.1",
            ),
        ];
        for old in [None, Some(0), Some(3)] {
            assert_eq!(
                newest_runtime_in_cache(&loader_cache(&entries, old)).as_deref(),
                Some("libomptarget.so.22.1"),
                "{old:?}"
            );
        }
        assert_eq!(
            newest_runtime_in_cache(&loader_cache(&entries[..1], None)),
            None
        );
        // Truncated or foreign files: nothing, never a panic.
        let cache = loader_cache(&entries, None);
        for len in 0..cache.len() {
            let _ = newest_runtime_in_cache(&cache[..len]);
        }
        assert_eq!(newest_runtime_in_cache(b"not a cache"), None);
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
