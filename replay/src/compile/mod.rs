//! Compiling IR images to the recording's target before a replay, the way
//! LLVM's plugins JIT an `-fopenmp-target-jit` image at load.
//!
//! An image whose bytes are LLVM bitcode (a recording's image, a `.bc`
//! part, or `--image`) is compiled by a chosen toolchain ([`toolchain`])
//! with the user's flags into a native image ([`command`]): a shared object
//! for the x86-64 host (linked as clang's offload linker links the host
//! device image), PTX for `nvptx64` (the driver JITs it), a code object
//! for `amdgcn`. The compiler runs confined ([`confine`]): the bitcode may
//! come from a pulled recording. Results are cached by content
//! ([`cache`]): the same IR, compiler binary, flags and target compile
//! once, across commands and processes, and each compiled image carries
//! its provenance ([`Provenance`]).

pub mod cache;
pub mod command;
pub mod confine;
pub mod error;
pub mod toolchain;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use rrstore_format::image::bitcode::{self, BitcodeInfo};
use serde::Serialize;

pub use error::CompileError;
pub use toolchain::Toolchain;

/// How IR is compiled (`--toolchain`, `--cflags`, `--arch`, the store's
/// cache directory); the defaults compile with the installed LLVM that
/// matches the IR's producer, `-O2`, without a cache.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompileOptions {
    /// `clang-22`, a version number (`22`), or a path to a clang binary.
    pub toolchain: Option<String>,
    /// Extra compiler flags, after rrstore's own (`-O3 -mllvm ...`).
    pub cflags: Vec<String>,
    /// GPU architecture (`sm_90`, `gfx942`); ignored for the host.
    pub arch: Option<String>,
    /// Where compiled images are cached (the store's `compiled/`).
    pub cache_dir: Option<PathBuf>,
    /// Replay the recording's `.bc` part instead of its native image.
    pub from_bitcode: bool,
    /// Replay a recording's IR whenever it has some: its `.bc` part
    /// before its native image (the caller named a compiler or flags, so
    /// the compiled image is what it asks about). Unlike `from_bitcode`, a
    /// recording without IR replays its native image.
    pub prefer_ir: bool,
    /// Run the compiler without confinement (debugging).
    pub unconfined: bool,
    /// Kill a compiler that runs longer (default [`DEFAULT_TIMEOUT`]).
    pub timeout: Option<Duration>,
}

/// A compile that takes longer than this is killed (a hostile or broken
/// input must not hang a `check` of thousands of recordings).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// What a compiled image was made from: shown by `replay`, in its JSON and
/// history, and written beside the cached image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Provenance {
    /// blake3 of the bitcode (hex).
    pub ir_blake3: String,
    /// blake3 of the compiled image (hex).
    pub image_blake3: String,
    /// What it was compiled for: `x86_64`, `nvptx64:sm_90`, `amdgcn:gfx942`.
    pub target: String,
    /// The compiler binary (resolved path) and its `--version` first line.
    pub compiler: String,
    pub compiler_version: String,
    /// blake3 of the compiler binary (hex).
    pub compiler_blake3: String,
    /// The IR's producer (`LLVM22.1.8`).
    pub producer: Option<String>,
    /// Every flag given to the compiler, rrstore's and the user's.
    pub flags: Vec<String>,
    /// Found in the cache instead of compiled now.
    #[serde(default)]
    pub cached: bool,
    /// Time spent compiling (0 when cached).
    #[serde(default)]
    pub compile_ns: u64,
    /// Where the cache keeps the image (none without a cache).
    #[serde(skip)]
    pub cached_image: Option<PathBuf>,
}

impl Provenance {
    /// What a history row keeps of it (the row names the image itself).
    pub fn compilation(&self) -> rrstore_store::Compilation {
        rrstore_store::Compilation {
            ir_blake3: self.ir_blake3.clone(),
            target: self.target.clone(),
            compiler: self.compiler.clone(),
            compiler_version: self.compiler_version.clone(),
            compiler_blake3: self.compiler_blake3.clone(),
            producer: self.producer.clone(),
            flags: self.flags.clone(),
            cached: self.cached,
            compile_ns: self.compile_ns,
        }
    }

    /// The label a compiled image gets in the store's image library
    /// (`image ls`, the report): where it came from, in one line.
    pub fn label(&self) -> String {
        let user: Vec<&str> = self
            .flags
            .iter()
            .map(String::as_str)
            .filter(|f| {
                !f.starts_with("-L") && !matches!(*f, "-O2" | "-fPIC" | "-shared" | "-lomp")
            })
            .collect();
        format!(
            "compiled IR {} ({}) by {}{}{}",
            &self.ir_blake3[..12.min(self.ir_blake3.len())],
            self.producer.as_deref().unwrap_or("unknown producer"),
            self.compiler_version,
            if user.is_empty() { "" } else { " " },
            user.join(" ")
        )
    }
}

/// A compiled image and where it came from.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub bytes: Vec<u8>,
    pub provenance: Provenance,
    /// What the compiler printed on stderr (kept with a cached image:
    /// `bisect --passes` reads the passes it ran from it).
    pub log: String,
}

/// Read `ir` and check it before any compiler runs: bitcode, the kernel
/// named in its symbol table, a triple.
pub fn inspect(ir: &[u8], kernel: &str) -> Result<BitcodeInfo, CompileError> {
    let info = bitcode::parse(ir).map_err(CompileError::Bitcode)?;
    if info.triple.is_none() {
        return Err(CompileError::NoTriple);
    }
    if !info.names_symbol(kernel) {
        return Err(CompileError::NoKernel {
            kernel: kernel.to_string(),
        });
    }
    Ok(info)
}

/// Compile `ir` (whose kernel is `kernel`) for its own triple with `opts`;
/// `arch` is the GPU architecture when the IR is for a GPU.
pub fn compile(ir: &[u8], kernel: &str, opts: &CompileOptions) -> Result<Compiled, CompileError> {
    let info = inspect(ir, kernel)?;
    let tc = toolchain::find(opts.toolchain.as_deref(), &info, opts.cache_dir.as_deref())?;
    let plan = command::plan(&info, opts.arch.as_deref(), &tc, &opts.cflags)?;
    let ir_hash = *blake3::hash(ir).as_bytes();
    let key = cache::key(&ir_hash, &tc, &plan);
    if let Some(dir) = &opts.cache_dir {
        if let Some(hit) = cache::lookup(dir, &key)? {
            return Ok(hit);
        }
    }
    let t = Instant::now();
    let (bytes, log) = confine::run(&tc, &plan, ir, opts)?;
    let provenance = Provenance {
        ir_blake3: rrstore_format::id::hex(&ir_hash),
        image_blake3: blake3::hash(&bytes).to_hex().to_string(),
        target: plan.target.clone(),
        compiler: tc.clang.display().to_string(),
        compiler_version: tc.version_line.clone(),
        compiler_blake3: rrstore_format::id::hex(&tc.blake3),
        producer: info.producer.clone(),
        flags: plan.flags.iter().chain(&plan.after).cloned().collect(),
        cached: false,
        compile_ns: t.elapsed().as_nanos() as u64,
        cached_image: None,
    };
    let mut provenance = provenance;
    if let Some(dir) = &opts.cache_dir {
        provenance.cached_image = Some(cache::insert(dir, &key, &bytes, &provenance, &log)?);
    }
    Ok(Compiled {
        bytes,
        provenance,
        log,
    })
}
