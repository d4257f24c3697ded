//! The provenance a history row keeps of an image that a replay compiled
//! from LLVM IR (spec/COMPILE.md): which IR, which compiler (path,
//! `--version` line, binary hash), which flags and target, and whether the
//! image came from the cache of compiled images. It is stored with the row
//! (`replay_history.compiled`, JSON, schema 9) rather than looked up in the
//! image library: the library row can be removed (`image rm`) and does not
//! say whether a given replay compiled or reused the image, while a row is
//! a measurement that must say for itself what ran.

use serde::{Deserialize, Serialize};

/// How the image a replay ran was compiled from IR.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Compilation {
    /// blake3 of the bitcode (hex).
    pub ir_blake3: String,
    /// What it was compiled for: `x86_64`, `nvptx64:sm_90`, `amdgcn:gfx942`.
    pub target: String,
    /// The compiler binary (links resolved).
    pub compiler: String,
    /// The first line of the compiler's `--version`.
    pub compiler_version: String,
    /// blake3 of the compiler binary (hex).
    pub compiler_blake3: String,
    /// The IR's producer (`LLVM22.1.8`), when its bitcode names one.
    #[serde(default)]
    pub producer: Option<String>,
    /// Every flag given to the compiler, rrstore's and the user's.
    #[serde(default)]
    pub flags: Vec<String>,
    /// Found in the cache of compiled images instead of compiled by this
    /// replay.
    #[serde(default)]
    pub cached: bool,
    /// Time spent compiling, nanoseconds (0 when cached).
    #[serde(default)]
    pub compile_ns: u64,
}

impl Compilation {
    /// One line for tables: `IR 1a2b3c4d5e6f (LLVM22.1.8) for x86_64 by
    /// Debian clang version 22.1.8 (...), flags -O2 -fPIC ..., cached`.
    pub fn summary(&self) -> String {
        format!(
            "IR {} ({}) for {} by {}, flags {}, {}",
            &self.ir_blake3[..12.min(self.ir_blake3.len())],
            self.producer.as_deref().unwrap_or("unknown producer"),
            self.target,
            self.compiler_version,
            if self.flags.is_empty() {
                "none".to_string()
            } else {
                self.flags.join(" ")
            },
            if self.cached {
                "cached".to_string()
            } else {
                format!("compiled in {:.0} ms", self.compile_ns as f64 / 1e6)
            }
        )
    }

    /// The column's text (JSON).
    pub(crate) fn to_column(c: Option<&Compilation>) -> Option<String> {
        c.and_then(|c| serde_json::to_string(c).ok())
    }

    /// The column's value read back. A value this build cannot read (a
    /// newer build's, or damaged) is dropped rather than failing the whole
    /// history: the row's other columns still say what ran.
    pub(crate) fn from_column(text: Option<String>) -> Option<Compilation> {
        text.and_then(|t| serde_json::from_str(&t).ok())
    }
}

/// One image compiled from IR that replays of a recording ran.
#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct CompiledImage {
    /// blake3 of the compiled image (hex).
    pub image: String,
    /// How it was compiled (as its newest row says; `cached` and
    /// `compile_ns` are that row's).
    #[serde(flatten)]
    pub how: Compilation,
    /// Replays that ran it.
    pub replays: u64,
}

impl crate::Store {
    /// The images compiled from IR that replays of `recording` ran, in the
    /// order they first ran, from its history rows (`show`).
    pub fn compiled_images(
        &self,
        recording: rrstore_format::RecordingId,
    ) -> crate::Result<Vec<CompiledImage>> {
        let mut out: Vec<CompiledImage> = Vec::new();
        for e in self.history(Some(recording))? {
            let Some(c) = e.compiled else { continue };
            let image = rrstore_format::id::hex(&e.image_hash);
            match out.iter_mut().find(|i| i.image == image) {
                Some(i) => {
                    i.how = c;
                    i.replays += 1;
                }
                None => out.push(CompiledImage {
                    image,
                    how: c,
                    replays: 1,
                }),
            }
        }
        Ok(out)
    }
}
