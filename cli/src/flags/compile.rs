//! How IR images are compiled before a replay (`--toolchain`, `--cflags`,
//! `--arch`, `--from-bitcode`), for every command that replays; the
//! configuration file's `toolchain` is the default `--toolchain`. The
//! compiled images are cached in the store's `compiled/` directory.

use std::path::Path;

use rrstore_replay::compile::CompileOptions;

#[derive(clap::Args, Clone, Debug, Default)]
pub struct CompileFlags {
    /// Compiler for IR images: clang-22, 22, or a path to clang [default:
    /// the installed LLVM matching the IR's producer, or `toolchain` in
    /// the configuration]. Given (or --cflags), a recording's .bc part
    /// runs compiled instead of its native image.
    #[arg(long, value_name = "clang-N|PATH")]
    pub toolchain: Option<String>,
    /// Extra compiler flags for IR images, after rrstore's -O2
    /// (e.g. '-O3 -mllvm -unroll-threshold=400'); split as a shell would.
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub cflags: Option<String>,
    /// GPU architecture an IR image is compiled for (sm_90, gfx942)
    /// [default: the recorded image's].
    #[arg(long, value_name = "ARCH")]
    pub arch: Option<String>,
    /// Replay the recording's bitcode (.bc) part, compiled, instead of
    /// its native image (an error when it has none); --toolchain or
    /// --cflags do so for every recording that has one.
    #[arg(long)]
    pub from_bitcode: bool,
}

impl CompileFlags {
    /// The compile options; `configured` is the configuration file's
    /// `toolchain`, `store` the store directory (its `compiled/` caches;
    /// `default_store` when none is named: `RRSTORE_DIR`),
    /// `unconfined` whether the sandbox is off.
    pub fn options(
        &self,
        configured: Option<&str>,
        store: Option<&Path>,
        default_store: Option<&Path>,
        unconfined: bool,
    ) -> anyhow::Result<CompileOptions> {
        let cflags = match &self.cflags {
            Some(s) => shlex::split(s).ok_or_else(|| {
                crate::exit::UsageError(format!(
                    "--cflags `{s}` has an unbalanced quote: quote it as a shell would"
                ))
            })?,
            None => Vec::new(),
        };
        Ok(CompileOptions {
            toolchain: self.toolchain.clone().or(configured.map(str::to_string)),
            cflags,
            arch: self.arch.clone(),
            cache_dir: rrstore_store::layout::resolve_dir(store, default_store)
                .map(|d| d.join("compiled")),
            from_bitcode: self.from_bitcode,
            // A compiler or flags named on the command line ask about the
            // compiled image: a recording's IR (its `.bc` part) runs
            // whenever it has some. The configuration's `toolchain` is
            // only the default compiler and selects nothing.
            prefer_ir: self.toolchain.is_some() || self.cflags.is_some(),
            unconfined,
            timeout: None,
        })
    }
}
