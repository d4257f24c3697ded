//! The OpenMP offload runtime libraries a host image needs: where they are
//! installed, loading them from a versioned LLVM directory the dynamic
//! loader does not search, naming the one that is missing, and the Debian
//! package that ships it.
//!
//! Debian, Ubuntu and the LLVM apt repositories install LLVM N's runtime
//! (`libomptarget.so.N.1`, and `libomp.so.5` beside it) in
//! `/usr/lib/llvm-N/lib`, which is not in the loader's path: Debian 12's
//! `libomp5-19` links only `libomp.so.5` into `/usr/lib/x86_64-linux-gnu`.
//! An image that needs such a runtime gets it loaded by full path first
//! ([`open_image`]); the loader then matches the image's `DT_NEEDED` entry to
//! the loaded library by its soname.

use std::ffi::{c_void, CStr, CString};
use std::path::PathBuf;

/// Test hook: a colon-separated list of directories searched for runtimes
/// instead of the loader's path and `/usr/lib/llvm-*/lib`
/// ([`crate::settings::ProcessSettings::runtime_search`]). In `rrstore`'s
/// own process the CLI installs it; a host runner is passed it in this
/// variable by its parent ([`crate::sandbox::env::runner_env`], internal
/// protocol) and installs it at start ([`adopt_from_parent`]).
pub const SEARCH_ENV: &str = "RRSTORE_RUNTIME_SEARCH";

/// In a host runner: install the runtime search its parent passed in
/// [`SEARCH_ENV`].
pub fn adopt_from_parent() {
    if let Some(v) = std::env::var_os(SEARCH_ENV) {
        crate::settings::update(|s| s.runtime_search = Some(split_search(&v)));
    }
}

/// The directories of a [`SEARCH_ENV`] value (empty entries left out).
pub fn split_search(v: &std::ffi::OsStr) -> Vec<PathBuf> {
    std::env::split_paths(v)
        .filter(|d| !d.as_os_str().is_empty())
        .collect()
}

/// [`SEARCH_ENV`]'s value for a runner, when the settings name directories.
pub fn search_setting() -> Option<(std::ffi::OsString, std::ffi::OsString)> {
    let dirs = crate::settings::get().runtime_search?;
    let joined = std::env::join_paths(dirs).ok()?;
    Some((SEARCH_ENV.into(), joined))
}

/// Where the versioned LLVM directories are.
const LLVM_PREFIX: &str = "/usr/lib";

/// An installed `libomptarget.so.<version>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Runtime {
    pub soname: String,
    /// The directory that holds it.
    pub dir: PathBuf,
}

/// `/usr/lib/llvm-N/lib` directories, newest LLVM first.
fn llvm_dirs() -> Vec<(u64, PathBuf)> {
    let mut dirs: Vec<(u64, PathBuf)> = std::fs::read_dir(LLVM_PREFIX)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let e = e.ok()?;
            let n = e
                .file_name()
                .to_str()?
                .strip_prefix("llvm-")?
                .parse()
                .ok()?;
            Some((n, e.path().join("lib")))
        })
        .filter(|(_, d)| d.is_dir())
        .collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.0));
    dirs
}

/// The directories searched for runtimes, in order: the test hook's, else
/// `LD_LIBRARY_PATH`, the system library directories and the versioned
/// LLVM directories (newest first).
fn search_dirs() -> Vec<PathBuf> {
    if let Some(dirs) = crate::settings::get().runtime_search {
        return dirs;
    }
    let from_env = std::env::var_os("LD_LIBRARY_PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&from_env)
        .filter(|d| !d.as_os_str().is_empty())
        .collect();
    dirs.extend(super::preload::SYSTEM_DIRS.iter().map(PathBuf::from));
    dirs.extend(llvm_dirs().into_iter().map(|(_, d)| d));
    dirs
}

/// Every offload runtime installed where `search_dirs` look, newest
/// version first (one entry per soname: the first directory that has it).
pub fn installed() -> Vec<Runtime> {
    let mut found: Vec<(Vec<u64>, Runtime)> = Vec::new();
    for dir in search_dirs() {
        for name in std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
        {
            let Some(key) = name
                .strip_prefix("libomptarget.so.")
                .and_then(super::preload::version_key)
            else {
                continue;
            };
            if !found.iter().any(|(_, r)| r.soname == name) {
                found.push((
                    key,
                    Runtime {
                        soname: name,
                        dir: dir.clone(),
                    },
                ));
            }
        }
    }
    found.sort_by(|a, b| b.0.cmp(&a.0));
    found.into_iter().map(|(_, r)| r).collect()
}

/// The LLVM major version a library's soname carries
/// (`libomptarget.so.19.1`, `libLLVM.so.19.1`, `libLLVM-19.so.1`).
fn llvm_major(library: &str) -> Option<u64> {
    let v = library
        .strip_prefix("libomptarget.so.")
        .or_else(|| library.strip_prefix("libLLVM.so."))
        .or_else(|| library.strip_prefix("libLLVM-"))?;
    v.split(['.', '-']).next()?.parse().ok()
}

/// Where `library` is in a versioned LLVM directory (or, under the test
/// hook, its directories): LLVM `major`'s first when known, then the
/// others, newest first.
pub fn find_versioned(library: &str, major: Option<u64>) -> Option<PathBuf> {
    let dirs: Vec<PathBuf> = if crate::settings::get().runtime_search.is_some() {
        search_dirs()
    } else {
        let mut d = llvm_dirs();
        let want = llvm_major(library).or(major);
        d.sort_by_key(|(n, _)| Some(*n) != want);
        d.into_iter().map(|(_, d)| d).collect()
    };
    dirs.into_iter()
        .map(|d| d.join(library))
        .find(|p| p.is_file())
}

fn dlerror_string() -> String {
    // SAFETY: dlerror returns NULL or a valid C string owned by libdl.
    let p = unsafe { libc::dlerror() };
    if p.is_null() {
        "unknown dynamic loader error".into()
    } else {
        // SAFETY: non-null pointer from dlerror is a NUL-terminated string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// `dlopen` the image at `path`. When the loader cannot find a library it
/// needs that a versioned LLVM directory has (the runtime, `libomp.so.5`,
/// `libLLVM`), load that file by path and try again. `Err`: the loader's
/// message for the first library found nowhere.
pub fn open_image(path: &CStr) -> Result<*mut c_void, String> {
    let mut loaded: Vec<String> = Vec::new();
    let mut major = None;
    loop {
        // SAFETY: dlopen of an image the user asked us to replay (in the
        // runner, the process that exists to run it); `path` is a C string.
        let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if !h.is_null() {
            return Ok(h);
        }
        let why = dlerror_string();
        let Some(lib) = missing_library(&why) else {
            return Err(why);
        };
        if loaded.contains(&lib) || loaded.len() >= 8 {
            return Err(why);
        }
        let Some(file) = find_versioned(&lib, major) else {
            return Err(why);
        };
        major = major.or_else(|| llvm_major(&lib));
        let Ok(cfile) = CString::new(file.as_os_str().as_encoded_bytes()) else {
            return Err(why);
        };
        // SAFETY: loading an OpenMP runtime library the image needs, by
        // path, into the runner; the handle stays open for the image.
        let dep = unsafe { libc::dlopen(cfile.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if dep.is_null() {
            return Err(format!("{}: {}", file.display(), dlerror_string()));
        }
        loaded.push(lib);
    }
}

/// Which Debian package provides a runtime library an image needs, given
/// the image's other `DT_NEEDED` entries (for `libomp.so.5`, whose soname
/// carries no LLVM version).
pub fn package_hint(library: &str, needed: &[String]) -> String {
    let runtime_major = needed
        .iter()
        .find_map(|n| n.strip_prefix("libomptarget.so.").map(|_| llvm_major(n)))
        .flatten();
    let pkg = if library.starts_with("libomptarget.so.") {
        match llvm_major(library) {
            // Debian ships LLVM 19's runtime in libomp5-19 (it has no
            // liboffload-19) and LLVM 20's and later in liboffload-N.
            Some(n) if n <= 19 => format!("libomp5-{n}"),
            Some(n) => format!("liboffload-{n}"),
            None => "liboffload-22".into(),
        }
    } else if library.starts_with("libomp.so") {
        format!("libomp5-{}", runtime_major.unwrap_or(19))
    } else if let Some(n) = llvm_major(library) {
        format!("libllvm{n}")
    } else {
        return format!(
            "install the package that ships it (`apt-file search {library}`); rrstore also looks in {LLVM_PREFIX}/llvm-N/lib"
        );
    };
    format!(
        "install it with `apt-get install -y {pkg}` (rrstore looks in the loader's path and in {LLVM_PREFIX}/llvm-N/lib)"
    )
}

/// The library a dynamic-loader error says it could not find, if any.
pub fn missing_library(dlerror: &str) -> Option<String> {
    let idx = dlerror.find(": cannot open shared object file")?;
    let before = &dlerror[..idx];
    let lib = before.rsplit(": ").next().unwrap_or(before).trim();
    (!lib.is_empty()).then(|| lib.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_missing_libraries_and_their_packages() {
        let e = "/proc/self/fd/5: libomptarget.so.22.1: cannot open shared object file: No such file or directory";
        assert_eq!(missing_library(e).as_deref(), Some("libomptarget.so.22.1"));
        let needed19 = vec!["libomp.so.5".to_string(), "libomptarget.so.19.1".into()];
        assert!(package_hint("libomptarget.so.22.1", &[]).contains("liboffload-22"));
        assert!(package_hint("libomptarget.so.19.1", &needed19).contains("-y libomp5-19`"));
        assert!(!package_hint("libomptarget.so.19.1", &needed19).contains("liboffload-19"));
        assert!(package_hint("libomp.so.5", &needed19).contains("libomp5-19"));
        assert!(package_hint("libLLVM.so.22.1", &[]).contains("libllvm22"));
        assert_eq!(missing_library("undefined symbol: foo"), None);
        assert_eq!(llvm_major("libLLVM-19.so.1"), Some(19));
        assert_eq!(llvm_major("libomp.so.5"), None);
    }
}
