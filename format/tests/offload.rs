//! The offload binary parser (format/src/offload) against its golden
//! vector (tests/fixtures/offload/packaged.offbin, made by LLVM 22's
//! llvm-offload-binary: make.sh there), hand-made version 2 and 3 binaries,
//! forged binaries an attacker would write, and many mutated inputs (the
//! deterministic counterpart of fuzz/fuzz_targets/offload_binary.rs).

use rrstore_format::offload::{container, parse_section, Entry, OffloadError};

fn fixture(name: &str) -> Vec<u8> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/offload")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// One line per entry, as packaged.expected holds them.
fn describe(file: &[u8], entries: &[Entry]) -> String {
    let mut s = String::new();
    for e in entries {
        let image = e.image_bytes(file);
        let target = rrstore_format::offload::target::of_entry(e, image)
            .map_or("-".to_string(), |t| t.describe());
        s.push_str(&format!(
            "binary@{} #{} v{} kind={} producer={} triple={} arch={} image={}..{} target={} blake3={}\n",
            e.binary_offset,
            e.index_in_binary,
            e.version,
            e.image_kind.name(),
            e.offload_kind.name(),
            e.triple(),
            e.arch(),
            e.image.start,
            e.image.end,
            target,
            &blake3::hash(image).to_hex()[..16],
        ));
    }
    s
}

#[test]
fn the_golden_vector_parses_to_its_expected_entries() {
    let file = fixture("packaged.offbin");
    let found = container::find(&file).unwrap().unwrap();
    assert_eq!(found.container, container::Container::Raw);
    let got = describe(&file, &found.entries);
    let want = String::from_utf8(fixture("packaged.expected")).unwrap();
    assert_eq!(got, want, "got:\n{got}");
}

/// A hand-written offload binary of `version` (1: NUL-terminated strings,
/// 2: strings with lengths, 3: the 40-byte header), laid out as LLVM's
/// writer lays it out: header, entries, string map, string table, images.
/// An image to write: its kind, its strings, its bytes.
type Image<'a> = (u16, &'a [(&'a str, &'a str)], &'a [u8]);

fn write(version: u32, images: &[Image]) -> Vec<u8> {
    let header = if version >= 3 { 40u64 } else { 32 };
    let str_entry = if version == 1 { 16u64 } else { 24 };
    let nstr: u64 = images.iter().map(|i| i.1.len() as u64).sum();
    let map_at = header + 40 * images.len() as u64;
    let tab_at = map_at + str_entry * nstr;
    let mut table = Vec::new();
    let mut map = Vec::new();
    for (_, strings, _) in images {
        for (k, v) in *strings {
            let k_at = tab_at + table.len() as u64;
            table.extend_from_slice(k.as_bytes());
            table.push(0);
            let v_at = tab_at + table.len() as u64;
            table.extend_from_slice(v.as_bytes());
            table.push(0);
            map.extend_from_slice(&k_at.to_le_bytes());
            map.extend_from_slice(&v_at.to_le_bytes());
            if version > 1 {
                map.extend_from_slice(&(v.len() as u64).to_le_bytes());
            }
        }
    }
    let data_at = (tab_at + table.len() as u64).div_ceil(8) * 8;
    let total: u64 = images.iter().map(|i| i.2.len() as u64).sum();
    let size = (data_at + total).div_ceil(8) * 8;
    let mut b = Vec::new();
    b.extend_from_slice(&[0x10, 0xff, 0x10, 0xad]);
    b.extend_from_slice(&version.to_le_bytes());
    for v in [size, header, images.len() as u64] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    if version >= 3 {
        b.extend_from_slice(&0u64.to_le_bytes());
    }
    let (mut s_at, mut i_at) = (map_at, data_at);
    for (kind, strings, image) in images {
        b.extend_from_slice(&kind.to_le_bytes());
        b.extend_from_slice(&1u16.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        for v in [s_at, strings.len() as u64, i_at, image.len() as u64] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        s_at += str_entry * strings.len() as u64;
        i_at += image.len() as u64;
    }
    b.extend_from_slice(&map);
    b.extend_from_slice(&table);
    b.resize(data_at as usize, 0);
    for (_, _, image) in images {
        b.extend_from_slice(image);
    }
    b.resize(size as usize, 0);
    b
}

const X86: &[(&str, &str)] = &[("triple", "x86_64-pc-linux-gnu"), ("arch", "")];
const SM90: &[(&str, &str)] = &[("triple", "nvptx64-nvidia-cuda"), ("arch", "sm_90")];

#[test]
fn versions_1_2_and_3_with_several_entries_parse_alike() {
    for version in [1, 2, 3] {
        let b = write(
            version,
            &[(1, X86, b"host image"), (2, SM90, b"BC\xc0\xde ir")],
        );
        let e = parse_section(&b, 0).unwrap_or_else(|e| panic!("v{version}: {e}"));
        assert_eq!(e.len(), if version == 1 { 1 } else { 2 }, "v{version}");
        assert_eq!(e[0].triple(), "x86_64-pc-linux-gnu");
        assert_eq!(e[0].image_bytes(&b), b"host image");
        if version > 1 {
            assert_eq!(e[1].arch(), "sm_90");
            assert_eq!(e[1].image_bytes(&b), b"BC\xc0\xde ir");
        }
    }
}

fn put(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

fn malformed_at(r: Result<Vec<Entry>, OffloadError>) -> u64 {
    match r {
        Err(OffloadError::Malformed { offset, what }) => {
            assert!(!what.is_empty());
            offset
        }
        other => panic!("expected a malformed-input error, got {other:?}"),
    }
}

#[test]
fn forged_sizes_offsets_and_counts_are_refused_with_their_offset() {
    let good = write(2, &[(1, X86, b"host image"), (1, SM90, b"cubin")]);
    let base = 4096; // as if the section started there in a file
                     // A huge entry count: refused before anything is reserved for it.
    let mut b = good.clone();
    put(&mut b, 24, u64::MAX / 2);
    assert_eq!(malformed_at(parse_section(&b, base)), base + 16);
    // A size past the bytes present (the section was cut).
    let mut b = good.clone();
    put(&mut b, 8, good.len() as u64 + 8);
    assert_eq!(malformed_at(parse_section(&b, base)), base + 8);
    // An image running past the binary's size, and one wrapping around.
    for (off, len) in [(good.len() as u64 - 2, 16), (u64::MAX - 3, 8)] {
        let mut b = good.clone();
        put(&mut b, 32 + 24, off);
        put(&mut b, 32 + 32, len);
        assert_eq!(malformed_at(parse_section(&b, base)), base + 32 + 24);
    }
    // An image laid over the entry table (a forged entry rewriting another).
    let mut b = good.clone();
    put(&mut b, 32 + 40 + 24, 40);
    assert_eq!(malformed_at(parse_section(&b, base)), base + 32 + 40 + 24);
    // A string entry's key offset past the table; a value without its NUL.
    let mut b = good.clone();
    let map_at = 32 + 80;
    put(&mut b, map_at, good.len() as u64 + 100);
    assert_eq!(malformed_at(parse_section(&b, base)), base + map_at as u64);
    let mut b = write(1, &[(1, X86, b"")]);
    let n = b.len();
    b[n - 1] = b'x';
    let last_value = u64::from_le_bytes(b[32 + 40 + 24..32 + 40 + 32].try_into().unwrap());
    put(&mut b, 32 + 40 + 24, n as u64 - 1);
    assert!(last_value > 0);
    assert_eq!(malformed_at(parse_section(&b, 0)), 32 + 40 + 24);
    // A string map with more strings than the binary holds.
    let mut b = good.clone();
    put(&mut b, 32 + 16, 1 << 40);
    assert_eq!(malformed_at(parse_section(&b, base)), base + 32 + 8);
    // Unknown versions and compressed version 3 binaries.
    let mut b = good.clone();
    b[4..8].copy_from_slice(&9u32.to_le_bytes());
    assert!(matches!(
        parse_section(&b, base),
        Err(OffloadError::Version { offset, version: 9 }) if offset == base
    ));
    let mut b = write(3, &[(1, X86, b"host image")]);
    put(&mut b, 32, 4096);
    assert!(matches!(
        parse_section(&b, 0),
        Err(OffloadError::Compressed { offset: 0 })
    ));
    // Garbage after a good binary is not taken as padding.
    let mut b = good.clone();
    b.extend_from_slice(b"not an offload binary, 32 bytes!");
    assert_eq!(
        malformed_at(parse_section(&b, base)),
        base + good.len() as u64
    );
}

#[test]
fn every_truncation_of_the_golden_vector_is_an_error_never_a_panic() {
    let file = fixture("packaged.offbin");
    let first = u64::from_le_bytes(file[8..16].try_into().unwrap()) as usize;
    for cut in 0..first {
        assert!(parse_section(&file[..cut], 0).is_err(), "cut at {cut}");
    }
    for cut in first..file.len() {
        let _ = parse_section(&file[..cut], 0);
    }
}

/// xorshift64*: deterministic, so a failure reproduces.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

#[test]
fn mutated_inputs_never_panic_and_never_point_outside_the_file() {
    let seeds = [
        fixture("packaged.offbin"),
        write(2, &[(1, X86, b"host image"), (2, SM90, b"ir")]),
        write(3, &[(1, SM90, b"cubin")]),
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let interesting = [
        0u64,
        1,
        7,
        8,
        31,
        32,
        40,
        0xff,
        u64::MAX,
        u64::MAX / 40,
        1 << 32,
    ];
    for round in 0..20_000 {
        let mut b = seeds[round % seeds.len()].clone();
        for _ in 0..1 + rng.next() % 4 {
            let at = (rng.next() % b.len() as u64) as usize;
            match rng.next() % 4 {
                0 => b[at] ^= 1 << (rng.next() % 8),
                1 => b[at] = rng.next() as u8,
                2 if at + 8 <= b.len() => {
                    let v = interesting[(rng.next() % interesting.len() as u64) as usize];
                    b[at & !7..(at & !7) + 8].copy_from_slice(&v.to_le_bytes());
                }
                _ => b.truncate(at),
            }
            if b.is_empty() {
                break;
            }
        }
        if let Ok(Some(found)) = container::find(&b) {
            for e in &found.entries {
                assert!(e.image.start <= e.image.end && e.image.end <= b.len() as u64);
            }
        }
    }
}

/// A minimal ELF64 file: 64-byte header, `payload` at offset 64, then a
/// section header table of a null section and one `SHT_LLVM_OFFLOADING`
/// section saying it is `sec_size` bytes at `sec_offset`.
fn elf_with_section(payload: &[u8], sec_offset: u64, sec_size: u64) -> Vec<u8> {
    let mut d = vec![0u8; 64];
    d[..4].copy_from_slice(b"\x7fELF");
    d[4] = 2;
    d[5] = 1;
    d[6] = 1;
    d.extend_from_slice(payload);
    d.resize(d.len().div_ceil(8) * 8, 0);
    let shoff = d.len() as u64;
    d[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
    d[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
    d[0x3c..0x3e].copy_from_slice(&2u16.to_le_bytes());
    d.extend_from_slice(&[0u8; 64]);
    let mut sh = [0u8; 64];
    sh[4..8].copy_from_slice(&container::SHT_LLVM_OFFLOADING.to_le_bytes());
    sh[0x18..0x20].copy_from_slice(&sec_offset.to_le_bytes());
    sh[0x20..0x28].copy_from_slice(&sec_size.to_le_bytes());
    d.extend_from_slice(&sh);
    d
}

#[test]
fn an_elf_section_is_read_in_place_and_a_forged_one_refused() {
    let packaged = fixture("packaged.offbin");
    let elf = elf_with_section(&packaged, 64, packaged.len() as u64);
    let found = container::find(&elf).unwrap().unwrap();
    assert_eq!(found.container, container::Container::Elf { sections: 1 });
    let raw = container::find(&packaged).unwrap().unwrap();
    assert_eq!(found.entries.len(), raw.entries.len());
    for (e, r) in found.entries.iter().zip(&raw.entries) {
        assert_eq!(e.image.start, r.image.start + 64, "file offsets");
        assert_eq!(e.image_bytes(&elf), r.image_bytes(&packaged));
    }
    // The section runs past the file's end: refused at its header's field.
    let shoff = elf.len() as u64 - 64;
    for (off, size) in [(64, 1 << 40), (u64::MAX - 8, 64)] {
        let forged = elf_with_section(&packaged, off, size);
        match container::find(&forged) {
            Err(OffloadError::Malformed { offset, .. }) => assert_eq!(offset, shoff + 0x18),
            other => panic!("{other:?}"),
        }
    }
    // An ELF without the section is no offload container.
    let mut plain = elf.clone();
    plain[shoff as usize + 4..shoff as usize + 8].copy_from_slice(&1u32.to_le_bytes());
    assert_eq!(container::find(&plain), Ok(None));
    // Mutations of the ELF around the section never panic.
    let mut rng = Rng(7);
    for _ in 0..5000 {
        let mut b = elf.clone();
        let at = (rng.next() % b.len() as u64) as usize;
        b[at] ^= 1 << (rng.next() % 8);
        if let Ok(Some(f)) = container::find(&b) {
            assert!(f.entries.iter().all(|e| e.image.end <= b.len() as u64));
        }
    }
}
