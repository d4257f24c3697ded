//! Content-defined chunking, chunk addresses and the chunk codec.
//!
//! Shared by the `.rra` archive and the store's pack files so that a chunk
//! has the same address (blake3 of its uncompressed bytes) everywhere:
//! a chunk moved from an archive into a store, or from a store to a remote,
//! never needs re-chunking or re-hashing to be deduplicated.
//!
//! Chunk boundaries come from FastCDC (2020 variant, `fastcdc::v2020`) so a
//! snapshot that shares a prefix or most of its blocks with an earlier one
//! shares its chunks. Each chunk is stored zstd-compressed, or raw when
//! compression does not make it smaller.

use std::io::Read;

use serde::{Deserialize, Serialize};

/// blake3 of a chunk's uncompressed bytes.
pub type ChunkHash = [u8; 32];

/// FastCDC size parameters, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkParams {
    pub min: u32,
    pub avg: u32,
    pub max: u32,
}

impl Default for ChunkParams {
    /// 16 KiB / 64 KiB / 256 KiB: small enough that a 16 KiB change in a
    /// 64 MiB arena costs a few chunks, large enough that a 1 TB store stays
    /// near 15 million chunk rows.
    fn default() -> Self {
        ChunkParams {
            min: 16 * 1024,
            avg: 64 * 1024,
            max: 256 * 1024,
        }
    }
}

impl ChunkParams {
    /// Check the parameters are within what FastCDC 2020 accepts.
    pub fn validate(&self) -> Result<(), ChunkError> {
        use fastcdc::v2020::{
            AVERAGE_MAX, AVERAGE_MIN, MAXIMUM_MAX, MAXIMUM_MIN, MINIMUM_MAX, MINIMUM_MIN,
        };
        let ok = (MINIMUM_MIN..=MINIMUM_MAX).contains(&self.min)
            && (AVERAGE_MIN..=AVERAGE_MAX).contains(&self.avg)
            && (MAXIMUM_MIN..=MAXIMUM_MAX).contains(&self.max)
            && self.min <= self.avg
            && self.avg <= self.max;
        if ok {
            Ok(())
        } else {
            Err(ChunkError::BadParams(*self))
        }
    }
}

/// How a chunk's bytes are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[repr(u8)]
pub enum Codec {
    /// Stored as is (compression would not shrink it).
    Raw = 0,
    /// One zstd frame.
    Zstd = 1,
}

impl Codec {
    pub fn from_u8(v: u8) -> Option<Codec> {
        match v {
            0 => Some(Codec::Raw),
            1 => Some(Codec::Zstd),
            _ => None,
        }
    }
}

/// Errors of chunking and of the chunk codec.
#[derive(Debug, thiserror::Error)]
pub enum ChunkError {
    #[error("chunk parameters min={} avg={} max={} are outside FastCDC's limits (min 64..1 MiB, avg 256..4 MiB, max 1 KiB..16 MiB, min <= avg <= max)", .0.min, .0.avg, .0.max)]
    BadParams(ChunkParams),
    #[error("reading the data to chunk failed at byte {offset}: {source}")]
    Read {
        offset: u64,
        #[source]
        source: std::io::Error,
    },
    #[error("chunk {} is corrupt: zstd could not decompress it ({reason})", crate::id::hex(.hash))]
    Decompress { hash: ChunkHash, reason: String },
    #[error("chunk {} is corrupt: it decompressed to {actual} bytes, expected {expected}", crate::id::hex(.hash))]
    Length {
        hash: ChunkHash,
        expected: u64,
        actual: u64,
    },
    #[error("chunk {} is corrupt: its bytes hash to {}", crate::id::hex(.expected), crate::id::hex(.actual))]
    Hash {
        expected: ChunkHash,
        actual: ChunkHash,
    },
}

/// blake3 of `data` (of an all-zero chunk from a per-thread cache:
/// `zeros.rs`).
pub fn hash(data: &[u8]) -> ChunkHash {
    crate::zeros::zero_hash(data).unwrap_or_else(|| *blake3::hash(data).as_bytes())
}

/// One chunk cut from a stream.
pub struct Chunk {
    /// Offset of the chunk in the stream.
    pub offset: u64,
    pub data: Vec<u8>,
}

/// Iterator of content-defined chunks over a reader, holding at most one
/// maximum-size chunk of the stream in memory.
pub struct Chunker<R: Read> {
    inner: fastcdc::v2020::StreamCDC<R>,
}

impl<R: Read> Chunker<R> {
    pub fn new(reader: R, params: ChunkParams) -> Result<Self, ChunkError> {
        params.validate()?;
        Ok(Chunker {
            inner: fastcdc::v2020::StreamCDC::new(reader, params.min, params.avg, params.max),
        })
    }
}

impl<R: Read> Iterator for Chunker<R> {
    type Item = Result<Chunk, ChunkError>;
    fn next(&mut self) -> Option<Self::Item> {
        let item = self.inner.next()?;
        Some(match item {
            Ok(c) => Ok(Chunk {
                offset: c.offset,
                data: c.data,
            }),
            Err(fastcdc::v2020::Error::IoError(e)) => Err(ChunkError::Read {
                offset: 0,
                source: e,
            }),
            Err(e) => Err(ChunkError::Read {
                offset: 0,
                source: std::io::Error::other(e.to_string()),
            }),
        })
    }
}

/// Windows of [`worth_compressing`]'s sample, spread evenly over the chunk.
const PROBE_WINDOWS: usize = 16;
/// Bytes per window: long enough to catch a run of zeros or a skewed field,
/// short enough that the sample (4 KiB) costs ~2% of zstd on the chunk.
const PROBE_WINDOW: usize = 256;
/// Sampled order-0 entropy, in bits per byte, from which a chunk is stored
/// raw without trying zstd. Uniform random bytes measure ~7.95 on a 4 KiB
/// sample; at 7.9 Huffman coding of the literals could save at most ~1%,
/// about what a zstd frame's headers and tables cost on a 64 KiB chunk.
const PROBE_MAX_BITS: f64 = 7.9;

/// Whether zstd is worth trying on `data`: false when a sample of it looks
/// like uniform random bytes (compressed or encrypted data, random words),
/// on which zstd spends its full time (~0.3-1 GB/s) only to store the chunk
/// raw. Chunks under 8 KiB are always tried. What the sample can miss: a
/// random-looking chunk that repeats itself at a distance (zstd would find
/// the matches); GPU arenas rarely hold such, and runs of zeros longer than
/// a window's spacing (chunk length / 16) lower the entropy and are caught.
pub fn worth_compressing(data: &[u8]) -> bool {
    if data.len() < 2 * PROBE_WINDOWS * PROBE_WINDOW {
        return true;
    }
    let mut counts = [0u32; 256];
    let step = (data.len() - PROBE_WINDOW) / (PROBE_WINDOWS - 1);
    for w in 0..PROBE_WINDOWS {
        let at = w * step;
        for &b in &data[at..at + PROBE_WINDOW] {
            counts[b as usize] += 1;
        }
    }
    let n = (PROBE_WINDOWS * PROBE_WINDOW) as f64;
    let sum: f64 = counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let c = c as f64;
            c * c.log2()
        })
        .sum();
    let bits = n.log2() - sum / n;
    bits < PROBE_MAX_BITS
}

/// Compress a chunk with zstd at `level`; returns the raw bytes instead when
/// compression does not make them smaller or [`worth_compressing`] says it
/// would not.
pub fn compress(data: &[u8], level: i32) -> (Codec, Vec<u8>) {
    if !worth_compressing(data) {
        return (Codec::Raw, data.to_vec());
    }
    match zstd::bulk::compress(data, level) {
        Ok(z) if z.len() < data.len() => (Codec::Zstd, z),
        _ => (Codec::Raw, data.to_vec()),
    }
}

/// Decode a stored chunk straight into `dst` (whose length is the expected
/// uncompressed length) and check its blake3, with this thread's
/// [`Decoder`]. Never leaves unverified bytes looking valid: on error the
/// contents of `dst` are unspecified and the caller must not use them.
pub fn decode_into(
    codec: Codec,
    stored: &[u8],
    dst: &mut [u8],
    expected: &ChunkHash,
) -> Result<(), ChunkError> {
    DECODER.with(|cell| match cell.try_borrow_mut() {
        Ok(mut d) => d.decode_into(codec, stored, dst, expected),
        // Re-entered on this thread (not done today): a decoder of its own.
        Err(_) => Decoder::default().decode_into(codec, stored, dst, expected),
    })
}

/// Check that a chunk's decoded bytes hash to `expected`.
pub fn verify(data: &[u8], expected: &ChunkHash) -> Result<(), ChunkError> {
    let actual = hash(data);
    if &actual != expected {
        return Err(ChunkError::Hash {
            expected: *expected,
            actual,
        });
    }
    Ok(())
}

thread_local! {
    static DECODER: std::cell::RefCell<Decoder> = const {
        std::cell::RefCell::new(Decoder { ctx: None })
    };
}

/// Decodes stored chunks with one zstd context, reused: creating one per
/// chunk (its tables are ~100 KiB) costs more than decoding a small chunk.
/// [`decode_into`] keeps one per thread. A reader that decodes many chunks
/// may keep its own instead, which also spares its thread the destructor a
/// thread-local needs: registering that takes the dynamic loader's lock,
/// held for the whole of a `dlopen` on another thread (the host runner
/// fills the arena while it loads the OpenMP runtime).
#[derive(Default)]
pub struct Decoder {
    ctx: Option<zstd::bulk::Decompressor<'static>>,
}

impl Decoder {
    /// [`decode_into`] with this decoder's context.
    pub fn decode_into(
        &mut self,
        codec: Codec,
        stored: &[u8],
        dst: &mut [u8],
        expected: &ChunkHash,
    ) -> Result<(), ChunkError> {
        self.decode_unverified_into(codec, stored, dst, expected)?;
        verify(dst, expected)
    }

    /// [`Decoder::decode_into`] without the check against `expected` (named
    /// in errors only): for a caller that verifies the bytes it assembles
    /// as a whole, such as a part against its blake3.
    pub fn decode_unverified_into(
        &mut self,
        codec: Codec,
        stored: &[u8],
        dst: &mut [u8],
        expected: &ChunkHash,
    ) -> Result<(), ChunkError> {
        match codec {
            Codec::Raw => {
                if stored.len() != dst.len() {
                    return Err(ChunkError::Length {
                        hash: *expected,
                        expected: dst.len() as u64,
                        actual: stored.len() as u64,
                    });
                }
                dst.copy_from_slice(stored);
            }
            Codec::Zstd => {
                let n = self
                    .decompress(stored, dst)
                    .map_err(|e| ChunkError::Decompress {
                        hash: *expected,
                        reason: e.to_string(),
                    })?;
                if n != dst.len() {
                    return Err(ChunkError::Length {
                        hash: *expected,
                        expected: dst.len() as u64,
                        actual: n as u64,
                    });
                }
            }
        }
        Ok(())
    }

    /// Decompress one zstd frame into `dst`.
    fn decompress(&mut self, stored: &[u8], dst: &mut [u8]) -> std::io::Result<usize> {
        if self.ctx.is_none() {
            self.ctx = Some(zstd::bulk::Decompressor::new()?);
        }
        match self.ctx.as_mut() {
            Some(d) => d.decompress_to_buffer(stored, dst),
            None => zstd::bulk::decompress_to_buffer(stored, dst),
        }
    }
}

/// Decode a stored chunk of known length into a new buffer, verified.
pub fn decode(
    codec: Codec,
    stored: &[u8],
    len: usize,
    expected: &ChunkHash,
) -> Result<Vec<u8>, ChunkError> {
    let mut out = vec![0u8; len];
    decode_into(codec, stored, &mut out, expected)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pseudo_random(n: usize, seed: u64) -> Vec<u8> {
        rrstore_tests::XorShift::new(seed).bytes(n, 0)
    }

    #[test]
    fn chunks_cover_the_stream_and_shared_prefix_shares_chunks() {
        let a = pseudo_random(2 << 20, 7);
        let mut b = a.clone();
        b.extend_from_slice(&pseudo_random(100_000, 9));
        let cut = |d: &[u8]| -> Vec<ChunkHash> {
            Chunker::new(d, ChunkParams::default())
                .unwrap()
                .map(|c| hash(&c.unwrap().data))
                .collect()
        };
        let total: usize = Chunker::new(&a[..], ChunkParams::default())
            .unwrap()
            .map(|c| c.unwrap().data.len())
            .sum();
        assert_eq!(total, a.len());
        let ha = cut(&a);
        let hb = cut(&b);
        let shared = ha.iter().filter(|h| hb.contains(h)).count();
        assert!(shared + 1 >= ha.len(), "{shared} of {}", ha.len());
    }

    #[test]
    fn codec_roundtrip_and_corruption_detected() {
        let zeros = vec![0u8; 65536];
        let (codec, z) = compress(&zeros, 3);
        assert_eq!(codec, Codec::Zstd);
        let h = hash(&zeros);
        assert_eq!(decode(codec, &z, zeros.len(), &h).unwrap(), zeros);
        let rnd = pseudo_random(4096, 3);
        let (codec, stored) = compress(&rnd, 3);
        assert_eq!(codec, Codec::Raw);
        let mut bad = stored.clone();
        bad[10] ^= 1;
        assert!(matches!(
            decode(codec, &bad, rnd.len(), &hash(&rnd)),
            Err(ChunkError::Hash { .. })
        ));
        let mut badz = z.clone();
        let last = badz.len() - 1;
        badz[last] ^= 0x55;
        assert!(decode(Codec::Zstd, &badz, zeros.len(), &h).is_err());
        // The thread's reused context is fine after a failed frame, and for
        // other contents and lengths.
        assert!(decode(Codec::Zstd, &z[..z.len() / 2], zeros.len(), &h).is_err());
        assert_eq!(decode(Codec::Zstd, &z, zeros.len(), &h).unwrap(), zeros);
        let text: Vec<u8> = (0..100_000u32).map(|i| b"abcab"[i as usize % 5]).collect();
        let (codec, zt) = compress(&text, 3);
        assert_eq!(codec, Codec::Zstd);
        assert_eq!(decode(codec, &zt, text.len(), &hash(&text)).unwrap(), text);
    }

    #[test]
    fn the_probe_skips_random_chunks_and_keeps_compressible_ones() {
        let rnd = pseudo_random(64 << 10, 5);
        assert!(!worth_compressing(&rnd));
        let (codec, stored) = compress(&rnd, 3);
        assert_eq!((codec, &stored[..]), (Codec::Raw, &rnd[..]));
        // Zeros, a chunk half zeros, random with one 8 KiB run of zeros, and
        // random words that leave their top byte zero all compress.
        let mut half = rnd.clone();
        half[32 << 10..].fill(0);
        let mut run = rnd.clone();
        run[20_000..20_000 + 8192].fill(0);
        let mut words = rnd.clone();
        for w in words.chunks_mut(4) {
            w[3] = 0;
        }
        for (what, d) in [
            ("zeros", vec![0u8; 64 << 10]),
            ("half zeros", half),
            ("8 KiB of zeros", run),
            ("24-bit words", words),
        ] {
            assert!(worth_compressing(&d), "{what}");
            let (codec, z) = compress(&d, 3);
            assert_eq!(codec, Codec::Zstd, "{what}");
            assert!(z.len() < d.len());
        }
        // Small chunks are always tried.
        assert!(worth_compressing(&rnd[..4096]));
    }

    #[test]
    fn rejects_bad_params() {
        let p = ChunkParams {
            min: 1,
            avg: 2,
            max: 3,
        };
        assert!(Chunker::new(&[][..], p).is_err());
    }
}
