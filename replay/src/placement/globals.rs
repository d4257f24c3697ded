//! Addresses of device globals, rebased to the replay's own copy (issue
//! 44). A kernel argument, or a word stored in the input snapshot, that is
//! the address of a global the recording captured
//! ([`rrstore_format::image::global_refs`], read with the *recorded*
//! image) is moved to the same byte of the same global as the backend
//! loaded it ([`Backend::global_address`]: the host runner's `dlsym`, a GPU
//! module's global), whatever the arena's placement and whichever image is
//! replayed (`--image`: another build, where the global may lie
//! elsewhere: it is found by name). The stored words are rewritten after
//! each fill and given their recorded value back before the output is
//! checked, so the output compares with the recorded one.

use std::io::Read;

use rrstore_format::image::global_refs::{self, LoadedImage};
use rrstore_format::PartRole;

use crate::backend::{Backend, BackendError};
use crate::error::ReplayError;
use crate::source::ReplaySource;

/// Pieces the input is scanned in.
const PIECE: usize = 1 << 20;

/// Where each referenced global was recorded and where it is now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GlobalMove {
    /// (recorded address, size, replay address) per global.
    moves: Vec<(u64, u64, u64)>,
}

impl GlobalMove {
    /// The moves of every global of `image` that `backend` can place.
    /// A global it does not export is an error: the kernel would be given
    /// an address of the recording process.
    pub fn new(image: &LoadedImage, backend: &mut dyn Backend) -> Result<GlobalMove, BackendError> {
        let mut moves = Vec::new();
        for g in &image.globals {
            if let Some(now) = backend.global_address(&g.name)? {
                moves.push((image.base.wrapping_add(g.start), g.size, now));
            }
        }
        Ok(GlobalMove { moves })
    }

    pub fn is_empty(&self) -> bool {
        self.moves.is_empty()
    }

    /// `value` moved to the replay's copy, if it points into a recorded
    /// global.
    pub fn forward(&self, value: u64) -> Option<u64> {
        self.moves.iter().find_map(|&(old, size, new)| {
            let off = value.wrapping_sub(old);
            (off < size).then(|| new.wrapping_add(off))
        })
    }

    /// Rebase the argument values that are recorded globals' addresses;
    /// returns how many.
    pub fn rebase_args(&self, args: &mut [u64]) -> u64 {
        let mut n = 0;
        for a in args.iter_mut() {
            if let Some(v) = self.forward(*a) {
                *a = v;
                n += 1;
            }
        }
        n
    }
}

/// What a replay of `src` moves: the globals its arguments name, and the
/// words of its input pointing into them (none when no argument names a
/// global). `recorded_image`: the recorded image when it is the one
/// replayed (else it is read from `src`: the addresses were the recorded
/// image's).
pub fn prepare(
    src: &mut ReplaySource,
    recorded_image: Option<&[u8]>,
    backend: &mut dyn Backend,
) -> Result<(GlobalMove, Vec<(u64, u64)>), ReplayError> {
    let loaded = match recorded_image {
        Some(image) => LoadedImage::recognise(&src.recording, image),
        None => {
            let rec = src.recording.clone();
            let image = global_refs::read_image(&rec, &mut *src.parts);
            LoadedImage::recognise(&rec, &image)
        }
    };
    match &loaded {
        Some(l) => Ok((GlobalMove::new(l, backend)?, stored_words(src, l)?)),
        None => Ok((GlobalMove::default(), Vec::new())),
    }
}

/// The words of `src`'s input snapshot that point into `image`'s globals:
/// (arena offset, recorded value), in offset order.
pub fn stored_words(
    src: &mut ReplaySource,
    image: &LoadedImage,
) -> Result<Vec<(u64, u64)>, ReplayError> {
    let rec = &src.recording;
    let kernel = rec.kernel.clone();
    let size = rec.arena.size;
    let part_err = |source| ReplayError::Part {
        kernel: kernel.clone(),
        role: PartRole::Input,
        source,
    };
    let (lo, hi) = image.span();
    let mut input = src.parts.open_part(PartRole::Input).map_err(part_err)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; PIECE];
    let mut off = 0u64;
    while off < size {
        let n = PIECE.min(usize::try_from(size - off).unwrap_or(PIECE));
        input.read_exact(&mut buf[..n]).map_err(part_err)?;
        for (k, w) in buf[..n].chunks_exact(8).enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(w);
            let v = u64::from_le_bytes(b);
            if (lo..hi).contains(&v) && image.resolve(v).is_some() {
                out.push((off + 8 * k as u64, v));
            }
        }
        off += n as u64;
    }
    Ok(out)
}

/// Write the replay's addresses over the stored words (after a fill).
pub fn rebase_stored(
    backend: &mut dyn Backend,
    moves: &GlobalMove,
    words: &[(u64, u64)],
) -> Result<(), BackendError> {
    for &(at, old) in words {
        if let Some(new) = moves.forward(old) {
            backend.upload(at, &new.to_le_bytes())?;
        }
    }
    Ok(())
}

/// Give the stored words the kernel left alone their recorded value back
/// (before the output is checked); returns how many.
pub fn restore_stored(
    backend: &mut dyn Backend,
    moves: &GlobalMove,
    words: &[(u64, u64)],
) -> Result<u64, BackendError> {
    let words: Vec<(u64, u64, u64)> = words
        .iter()
        .filter_map(|&(at, old)| Some((at, moves.forward(old)?, old)))
        .collect();
    backend.restore_words(&words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_move_to_the_same_byte_of_the_replayed_global() {
        let m = GlobalMove {
            moves: vec![(0x7f00_0000_4100, 2048, 0x7e00_0000_8100)],
        };
        let mut args = vec![u64::MAX, 0x7f00_0000_4100 + 16, 0x7f00_0000_4100 + 2048, 5];
        assert_eq!(m.rebase_args(&mut args), 1);
        assert_eq!(
            args,
            vec![u64::MAX, 0x7e00_0000_8110, 0x7f00_0000_4100 + 2048, 5]
        );
    }
}
