//! Which compiler compiles an IR image: `--toolchain clang-22`, a version
//! (`22`), a path, or by default the installed LLVM whose major version is
//! the IR producer's, where Debian and Ubuntu install it
//! (`/usr/lib/llvm-N/bin`) or as `clang-N` on `PATH`; failing that, the
//! oldest installed LLVM newer than the producer (a newer reader reads
//! older bitcode, never the reverse).

use std::path::{Path, PathBuf};
use std::process::Command;

use rrstore_format::image::bitcode::BitcodeInfo;

use super::CompileError;

/// A compiler, identified by what it is rather than what it is called.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Toolchain {
    /// The clang binary, links resolved.
    pub clang: PathBuf,
    /// First line of `clang --version`.
    pub version_line: String,
    /// LLVM major version.
    pub major: u32,
    /// blake3 of the binary: two compilers with one name are told apart.
    pub blake3: [u8; 32],
    /// The LLVM `bin` directory it lives in (llc, ld.lld beside it).
    pub bin: PathBuf,
}

impl Toolchain {
    /// The LLVM `lib` directory beside `bin` (libomp for host images).
    pub fn lib(&self) -> PathBuf {
        self.bin
            .parent()
            .map(|p| p.join("lib"))
            .unwrap_or_else(|| PathBuf::from("/usr/lib"))
    }
}

/// Where Debian and Ubuntu install LLVM N.
fn debian_dir(major: u32) -> PathBuf {
    PathBuf::from(format!("/usr/lib/llvm-{major}/bin/clang"))
}

/// `name` on `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// The installed `/usr/lib/llvm-N` majors, ascending.
fn installed_majors() -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_dir("/usr/lib")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.strip_prefix("llvm-")?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// Find the toolchain `spec` asks for (default: by the IR's producer) and
/// check that it can read the IR.
pub fn find(
    spec: Option<&str>,
    ir: &BitcodeInfo,
    cache: Option<&Path>,
) -> Result<Toolchain, CompileError> {
    let producer = ir.producer_major();
    let (wanted, candidates): (String, Vec<PathBuf>) = match spec {
        Some(s) if s.contains('/') => (s.to_string(), vec![PathBuf::from(s)]),
        Some(s) => {
            let major = s.strip_prefix("clang-").unwrap_or(s);
            match major.parse::<u32>() {
                Ok(m) => (
                    format!("clang-{m}"),
                    [Some(debian_dir(m)), on_path(&format!("clang-{m}"))]
                        .into_iter()
                        .flatten()
                        .collect(),
                ),
                Err(_) => (s.to_string(), on_path(s).into_iter().collect()),
            }
        }
        None => {
            let mut c = Vec::new();
            if let Some(m) = producer {
                c.push(debian_dir(m));
                c.extend(on_path(&format!("clang-{m}")));
                c.extend(
                    installed_majors()
                        .into_iter()
                        .filter(|&n| n > m)
                        .map(debian_dir),
                );
            } else {
                c.extend(installed_majors().into_iter().rev().map(debian_dir));
            }
            c.extend(on_path("clang"));
            let wanted = producer.map_or("clang".to_string(), |m| format!("clang-{m} or newer"));
            (wanted, c)
        }
    };
    let Some(found) = candidates.iter().find(|p| p.is_file()) else {
        return Err(CompileError::ToolchainMissing {
            looked: if candidates.is_empty() {
                "PATH".into()
            } else {
                candidates
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            },
            wanted,
        });
    };
    let tc = match cache {
        Some(dir) => identify_cached(found, dir)?,
        None => identify(found)?,
    };
    if let (Some(p), Some(text)) = (producer, ir.producer.as_deref()) {
        if tc.major < p {
            return Err(CompileError::ToolchainTooOld {
                compiler: tc.clang,
                have: tc.major,
                producer: text.to_string(),
            });
        }
    }
    Ok(tc)
}

/// What [`identify_cached`] keeps per compiler binary.
#[derive(serde::Serialize, serde::Deserialize)]
struct Known {
    path: PathBuf,
    dev: u64,
    ino: u64,
    size: u64,
    mtime_ns: i128,
    version_line: String,
    major: u32,
    blake3: String,
}

/// [`identify`], remembered in `dir/toolchains/` by the binary's device,
/// inode, size and modification time: a replay of a cached compiled image
/// neither runs the compiler nor reads its binary (an upgraded compiler is
/// a new file, hence identified again).
pub fn identify_cached(clang: &Path, dir: &Path) -> Result<Toolchain, CompileError> {
    use std::os::unix::fs::MetadataExt;
    let Ok(resolved) = std::fs::canonicalize(clang) else {
        return identify(clang);
    };
    let Ok(meta) = std::fs::metadata(&resolved) else {
        return identify(clang);
    };
    let mtime_ns = i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec());
    let name = blake3::hash(resolved.as_os_str().as_encoded_bytes()).to_hex();
    let file = dir.join("toolchains").join(format!("{}.json", &name[..32]));
    let bin = || {
        resolved
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("/usr/bin"))
    };
    if let Some(k) = std::fs::read(&file)
        .ok()
        .and_then(|b| serde_json::from_slice::<Known>(&b).ok())
    {
        let hash = rrstore_format::id::parse_hex32(&k.blake3);
        if k.path == resolved
            && (k.dev, k.ino, k.size, k.mtime_ns) == (meta.dev(), meta.ino(), meta.size(), mtime_ns)
        {
            if let Some(blake3) = hash {
                return Ok(Toolchain {
                    clang: resolved.clone(),
                    version_line: k.version_line,
                    major: k.major,
                    blake3,
                    bin: bin(),
                });
            }
        }
    }
    let tc = identify(clang)?;
    let k = Known {
        path: resolved,
        dev: meta.dev(),
        ino: meta.ino(),
        size: meta.size(),
        mtime_ns,
        version_line: tc.version_line.clone(),
        major: tc.major,
        blake3: rrstore_format::id::hex(&tc.blake3),
    };
    // Best effort: a cache that cannot be written only costs time.
    if let Some(parent) = file.parent() {
        let _ = std::fs::create_dir_all(parent);
        if let (Ok(bytes), Ok(mut tmp)) = (
            serde_json::to_vec(&k),
            tempfile::NamedTempFile::new_in(parent),
        ) {
            use std::io::Write;
            if tmp.write_all(&bytes).is_ok() {
                let _ = tmp.persist(&file);
            }
        }
    }
    Ok(tc)
}

/// Run `clang --version` and hash the binary.
pub fn identify(clang: &Path) -> Result<Toolchain, CompileError> {
    let io = |what, source| CompileError::Io {
        what,
        path: clang.to_path_buf(),
        source,
    };
    let resolved = std::fs::canonicalize(clang).map_err(|e| io("resolving", e))?;
    let out = Command::new(&resolved)
        .arg("--version")
        .output()
        .map_err(|e| io("running", e))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text.lines().next().unwrap_or("").trim().to_string();
    let major = line
        .split("version ")
        .nth(1)
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.trim().parse().ok())
        .ok_or_else(|| CompileError::ToolchainVersion {
            compiler: resolved.clone(),
            printed: line.clone(),
        })?;
    let bytes = std::fs::read(&resolved).map_err(|e| io("reading", e))?;
    // The LLVM tools beside the compiler the user named (not the link
    // target's directory: Debian's /usr/bin/clang-22 leads to llvm-22/bin).
    let bin = resolved
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/usr/bin"));
    Ok(Toolchain {
        clang: resolved,
        version_line: line,
        major,
        blake3: *blake3::hash(&bytes).as_bytes(),
        bin,
    })
}
