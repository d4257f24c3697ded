//! The version 3 manifest encoding, `"RRM3"` | one zstd frame compressed
//! with a fixed dictionary (spec/REMOTE.md "Manifest dictionary").
//!
//! Why a dictionary: a manifest is about 1.1 KB of MessagePack whose field
//! names, descriptor keys and value shapes are the same in every recording,
//! and zstd alone only gets it to ~790 B, which is most of what a pull of
//! a similar recording transfers besides the chunks (issue 20: `jacobi`,
//! 26 manifests were 20.6 KB of 42 KB of overhead). With the dictionary a
//! manifest is ~320 B. The dictionary is the MessagePack of the 25
//! manifests of the bundled test recordings, concatenated in the order of
//! their IDs (`manifest_dict.bin`); it is part of the format and never
//! changes (its blake3 is checked by a test): a different dictionary
//! would need a new magic.

/// The dictionary: zstd's "raw content" kind (no header, no dictionary
/// ID in the frames).
const DICT: &[u8] = include_bytes!("manifest_dict.bin");

pub const MAGIC: &[u8; 4] = b"RRM3";

/// `"RRM3"` | zstd (level 19, with [`DICT`], with the frame's content
/// checksum) of `raw`. The checksum is what detects damage to the fields
/// outside the recording ID (label, tags, source, import time): a flipped
/// byte in a literal decodes to a different but well-formed manifest.
pub fn pack(raw: &[u8]) -> Result<Vec<u8>, String> {
    let mut c = zstd::bulk::Compressor::with_dictionary(19, DICT).map_err(|e| e.to_string())?;
    c.include_checksum(true).map_err(|e| e.to_string())?;
    let z = c.compress(raw).map_err(|e| e.to_string())?;
    let mut v = MAGIC.to_vec();
    v.extend_from_slice(&z);
    Ok(v)
}

/// The MessagePack of an `"RRM3"` body (without its magic), at most `max`
/// bytes.
pub fn unpack(z: &[u8], max: usize) -> Result<Vec<u8>, String> {
    let mut d = zstd::bulk::Decompressor::with_dictionary(DICT).map_err(|e| e.to_string())?;
    d.decompress(z, max)
        .map_err(|e| format!("does not decompress with the version 3 dictionary: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dictionary_is_the_one_the_spec_names() {
        assert_eq!(
            blake3::hash(DICT).to_hex().as_str(),
            "aab06f419d56b4f17e435f659da83f95254cf4bb26c32dd3df9a73ef0542a649"
        );
        // Raw content: not zstd's trained-dictionary format.
        assert_ne!(&DICT[..4], &[0x37, 0xa4, 0x30, 0xec]);
    }

    #[test]
    fn round_trips_and_a_body_without_the_dictionary_is_refused() {
        let raw = &DICT[1000..2100];
        let packed = pack(raw).unwrap();
        assert_eq!(&packed[..4], MAGIC);
        assert_eq!(unpack(&packed[4..], 1 << 20).unwrap(), raw);
        // A frame made without the dictionary decodes to other bytes or
        // not at all; one made with it never decodes without it.
        let plain = zstd::bulk::decompress(&packed[4..], 1 << 20);
        assert!(plain.map_or(true, |p| p != raw));
    }

    #[test]
    fn a_flipped_byte_never_decodes_to_other_bytes() {
        // Manifest-like bytes that are not a piece of the dictionary.
        let mut raw = DICT[5000..6100].to_vec();
        raw.reverse();
        raw[100..140].copy_from_slice(&[0x5a; 40]);
        let packed = pack(&raw).unwrap();
        let mut refused = 0;
        for k in 4..packed.len() {
            let mut bad = packed.clone();
            bad[k] ^= 0x10;
            match unpack(&bad[4..], 1 << 20) {
                Err(_) => refused += 1,
                // zstd ignores the frame header's unused bit.
                Ok(got) => assert_eq!(got, raw, "byte {k} of {}", packed.len()),
            }
        }
        // Only header bits zstd does not interpret may go unnoticed.
        assert!(
            refused + 4 >= packed.len() - 4,
            "{refused} of {}",
            packed.len() - 4
        );
    }
}
