//! Addresses of device globals among a recording's values (issue 44): a
//! kernel argument, or a word stored in the arena, that is the address of a
//! `declare target` global (a program passing its global table to a
//! kernel) points into the recording process's copy of the image, not the
//! arena. Replayed as recorded it points at nothing (the host runner
//! crashes); it must be rebased to the replay's own copy of the global.
//!
//! Nothing in an LLVM recording says where the image was loaded, so the
//! load base is recognised from the values themselves ([`LoadedImage::recognise`]):
//! a shared-object image (`ET_DYN`: the host target's, AMDGPU code objects)
//! is loaded at a page-aligned base, so the address of byte `o` of an
//! exported global whose symbol value is `v` is `base + v + o` with `base`
//! a multiple of [`PAGE`]. Only the globals the recording captured (its
//! `globals` list, the ones the runtime registered) and values at or above
//! [`MIN_ADDRESS`] outside the arena, with a base within [`NEAR_ARENA`]
//! (1 TiB) of the arena's, are considered. Each argument value
//! votes for every base that explains it; the base with most votes wins
//! (ties: the highest base, the reference nearest a global's start). Where
//! a global is larger than a page, a single value pointing more than a
//! page into it is read as pointing into its first page: the base cannot
//! be told from such a value alone.
//!
//! The same rule serves every user: `inspect`/`show` (`global NAME+offset`),
//! `show --pointers`, and the replay, which moves each reference to the
//! replayed image's copy of the same global by name (so relocation and
//! `--image`, another build with another layout, are alike).

use std::collections::BTreeMap;

use serde::Serialize;

use super::elf;
use crate::model::{PartRole, PartSource, Recording};

/// The page size an image's load base is a multiple of.
pub const PAGE: u64 = 4096;
/// Values below this are never read as global addresses (sizes, counts
/// and the bits of a float are; no shared object is loaded that low).
pub const MIN_ADDRESS: u64 = 1 << 32;
/// Values from here up are not user-space addresses (47 bits on x86-64,
/// 48 for GPU virtual addresses).
const MAX_ADDRESS: u64 = 1 << 48;
/// The image lies within this distance of the arena: both are mappings of
/// one process (the `mmap` area; a GPU's virtual address space), so a
/// 64-bit scalar (a seed, a size) is rarely mistaken for an address.
pub const NEAR_ARENA: u64 = 1 << 40;
/// Candidate bases counted per value and global (a global of more pages
/// than this is only matched in its first ones).
const MAX_PAGES: u64 = 64;

/// An exported global of the image that the recording captured.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ImageGlobal {
    pub name: String,
    /// Its symbol value: the offset from the load base.
    pub start: u64,
    pub size: u64,
}

/// A value that is the address of byte `offset` of global `name`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GlobalRef {
    pub name: String,
    pub offset: u64,
}

impl std::fmt::Display for GlobalRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "global {}+{}", self.name, self.offset)
    }
}

/// Where the recording process had loaded the image, and its globals.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LoadedImage {
    pub base: u64,
    pub globals: Vec<ImageGlobal>,
}

/// The recording's captured globals as exported by `image` (a shared
/// object), with their symbol values; empty for any other image.
pub fn image_globals(rec: &Recording, image: &[u8]) -> Vec<ImageGlobal> {
    const ET_DYN: u16 = 3;
    if image.get(16..18) != Some(&ET_DYN.to_le_bytes()[..]) {
        return Vec::new();
    }
    let Ok(info) = elf::parse(image) else {
        return Vec::new();
    };
    rec.globals
        .iter()
        .filter_map(|g| {
            let s = info.symbol(&g.name)?;
            (s.kind == elf::SymKind::Object && s.size > 0).then(|| ImageGlobal {
                name: g.name.clone(),
                start: s.value,
                size: s.size,
            })
        })
        .collect()
}

impl LoadedImage {
    /// Recognise the load base from the recording's argument values (see
    /// the module documentation); `None` when no argument is the address
    /// of a captured global.
    pub fn recognise(rec: &Recording, image: &[u8]) -> Option<LoadedImage> {
        let globals = image_globals(rec, image);
        if globals.is_empty() {
            return None;
        }
        let mut votes: BTreeMap<u64, u64> = BTreeMap::new();
        let mut values: Vec<u64> = rec
            .args
            .iter()
            .copied()
            .filter(|&a| {
                (MIN_ADDRESS..MAX_ADDRESS).contains(&a) && rec.arena.offset_of(a).is_none()
            })
            .collect();
        values.sort_unstable();
        values.dedup();
        for &a in &values {
            let mut bases = Vec::new();
            for g in &globals {
                let Some(rel) = a.checked_sub(g.start) else {
                    continue;
                };
                let mut off = rel % PAGE;
                while off < g.size && off / PAGE < MAX_PAGES {
                    bases.push(rel - off);
                    off += PAGE;
                }
            }
            bases.sort_unstable();
            bases.dedup();
            let near = |b: u64| rec.arena.base.is_none_or(|a| a.abs_diff(b) < NEAR_ARENA);
            for b in bases.into_iter().filter(|&b| b > 0 && near(b)) {
                *votes.entry(b).or_default() += 1;
            }
        }
        let best = votes.values().copied().max()?;
        // The highest of the bases with most votes.
        let base = votes
            .iter()
            .rev()
            .find(|(_, &n)| n == best)
            .map(|(&b, _)| b)?;
        Some(LoadedImage { base, globals })
    }

    /// The global `value` points into, if any.
    pub fn resolve(&self, value: u64) -> Option<GlobalRef> {
        let rel = value.checked_sub(self.base)?;
        self.globals.iter().find_map(|g| {
            let off = rel.checked_sub(g.start)?;
            (off < g.size).then(|| GlobalRef {
                name: g.name.clone(),
                offset: off,
            })
        })
    }

    /// The recorded address range the globals span, `[lo, hi)`: a cheap
    /// first test before [`resolve`](Self::resolve).
    pub fn span(&self) -> (u64, u64) {
        let lo = self.globals.iter().map(|g| g.start).min().unwrap_or(0);
        let hi = self
            .globals
            .iter()
            .map(|g| g.start.saturating_add(g.size))
            .max()
            .unwrap_or(0);
        (self.base.saturating_add(lo), self.base.saturating_add(hi))
    }
}

/// Images larger than this are not read to recognise globals (a shared
/// object of device code is far smaller).
const MAX_IMAGE: u64 = 256 << 20;

/// The recording's image read from `src`, for [`LoadedImage::recognise`];
/// empty when it has none or it is unreadable (nothing is then
/// recognised: the values are shown and replayed as recorded).
pub fn read_image(rec: &Recording, src: &mut dyn PartSource) -> Vec<u8> {
    let Some(p) = rec.part(PartRole::Image).filter(|p| p.len <= MAX_IMAGE) else {
        return Vec::new();
    };
    let mut buf = vec![0u8; p.len as usize];
    match src.read_part_into(PartRole::Image, &mut buf) {
        Ok(()) => buf,
        Err(_) => Vec::new(),
    }
}

/// Per argument, the global it is the address of (`None` for the others).
pub fn argument_refs(rec: &Recording, image: &[u8]) -> Vec<Option<GlobalRef>> {
    match LoadedImage::recognise(rec, image) {
        Some(l) => rec.args.iter().map(|&a| l.resolve(a)).collect(),
        None => vec![None; rec.args.len()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Arena, Global};

    fn fixture(rel: &str) -> Vec<u8> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures");
        std::fs::read(dir.join(rel)).unwrap()
    }

    /// The `globals` fixture's image (g_table at 0x4100, 2048 bytes;
    /// g_scale at 0x4008, g_counter at 0x400c) with `args`.
    fn rec(args: Vec<u64>) -> (Recording, Vec<u8>) {
        let dir = "llvm22-host/globals/__omp_offloading_fe00_9ae057_main_l13";
        let image = fixture(&format!("{dir}.image"));
        let mut r = crate::llvm::load(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/fixtures")
                .join(format!("{dir}.json"))
                .as_path(),
        )
        .unwrap()
        .recording;
        r.args = args;
        (r, image)
    }

    #[test]
    fn an_argument_at_a_global_gives_the_base_and_its_offset() {
        let base = 0x7f7d_f863_4000u64;
        let (r, image) = rec(vec![u64::MAX, base + 0x4100 + 16, 1024]);
        let l = LoadedImage::recognise(&r, &image).unwrap();
        assert_eq!(l.base, base);
        let refs = argument_refs(&r, &image);
        assert_eq!(
            refs[1],
            Some(GlobalRef {
                name: "g_table".into(),
                offset: 16
            })
        );
        assert_eq!(refs[1].as_ref().unwrap().to_string(), "global g_table+16");
        assert_eq!((refs[0].clone(), refs[2].clone()), (None, None));
        assert_eq!(l.resolve(base + 0x400c).unwrap().name, "g_counter");
        assert_eq!(l.resolve(base + 0x4100 + 2048), None);
    }

    #[test]
    fn small_values_arena_pointers_and_misaligned_values_are_not_globals() {
        let (mut r, image) = rec(vec![]);
        let arena = r.arena.base.unwrap();
        // 0x100 past a page boundary is inside no global (g_table starts at
        // 0x100, 2048 bytes: 0x900 would be past its end).
        r.args = vec![4096 + 0x4100, arena, 0x7f00_0000_0900 + 0x4000];
        assert!(LoadedImage::recognise(&r, &image).is_none());
        // A 64-bit scalar that fits a global but lies far from the arena.
        r.args = vec![0x1000_0000_4100];
        assert!(LoadedImage::recognise(&r, &image).is_none(), "far");
        r.globals = Vec::<Global>::new();
        r.args = vec![0x7f7d_f863_4000 + 0x4100];
        assert!(LoadedImage::recognise(&r, &image).is_none(), "not captured");
        r.arena = Arena::default();
        assert!(image_globals(&r, b"not an image").is_empty());
    }

    #[test]
    fn two_arguments_agree_on_one_base() {
        let base = 0x7f7d_f863_4000u64;
        // Both vote for `base`.
        let (r, image) = rec(vec![base + 0x4008, base + 0x400c]);
        let l = LoadedImage::recognise(&r, &image).unwrap();
        assert_eq!(l.base, base);
        assert_eq!(l.span(), (base + 0x4008, base + 0x4100 + 2048));
    }
}
