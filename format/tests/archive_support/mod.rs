//! Helpers shared by the archive tests: an in-memory part source, synthetic
//! recordings with GPU-like contents, and the real fixtures.
#![allow(dead_code)]

use std::io::{self, Read};
use std::path::PathBuf;

use rrstore_format::archive::{self, WriteOptions};
use rrstore_format::image::ImageTarget;
use rrstore_format::{Arena, Generation, LaunchConfig, PartInfo, PartRole, PartSource, Recording};

/// Part bytes held in memory.
pub struct MemSource(pub Vec<(PartRole, Vec<u8>)>);

impl MemSource {
    pub fn get(&self, role: PartRole) -> &[u8] {
        &self.0.iter().find(|(r, _)| *r == role).unwrap().1
    }
}

impl PartSource for MemSource {
    fn open_part(&mut self, role: PartRole) -> io::Result<Box<dyn Read + '_>> {
        match self.0.iter().find(|(r, _)| *r == role) {
            Some((_, b)) => Ok(Box::new(&b[..])),
            None => Err(io::Error::new(io::ErrorKind::NotFound, "no such part")),
        }
    }
}

pub use rrstore_tests::noise;

/// A GPU-like buffer: zeros, a float ramp, random bytes.
pub fn gpu_like(n: usize, seed: u64) -> Vec<u8> {
    let mut v = vec![0u8; n];
    let third = n / 3;
    for (i, c) in v[third..2 * third].chunks_exact_mut(4).enumerate() {
        c.copy_from_slice(&(i as f32 * 0.5 + seed as f32).to_le_bytes());
    }
    let r = noise(n - 2 * third, seed);
    v[2 * third..].copy_from_slice(&r);
    v
}

/// A recording whose parts are `parts` (kernel-named generation).
pub fn synthetic(stem: &str, parts: Vec<(PartRole, Vec<u8>)>) -> (Recording, MemSource) {
    let size = parts
        .iter()
        .find(|(r, _)| *r == PartRole::Input)
        .map_or(0, |(_, b)| b.len() as u64);
    let descriptor = format!(
        "{{\"Name\":\"{stem}\",\"NumArgs\":2,\"ArgPtrs\":[-1,4096],\"ArgOffsets\":[0,0],\"DeviceMemorySize\":{size}}}"
    );
    let rec = Recording {
        kernel: stem.to_string(),
        generation: Generation::KernelNamed,
        stem: stem.to_string(),
        args: vec![u64::MAX, 4096],
        arg_offsets: vec![0, 0],
        launch: LaunchConfig {
            num_teams: 1,
            num_threads: 1,
            shared_memory: 0,
            loop_trip_count: 16,
            teams_limits: None,
            threads_limits: None,
        },
        device_id: 0,
        arena: Arena {
            base: Some(4096),
            size,
            reserved: None,
        },
        globals: vec![],
        image_target: ImageTarget::Unknown,
        descriptor: descriptor.into_bytes(),
        parts: parts
            .iter()
            .map(|(role, b)| PartInfo {
                role: *role,
                len: b.len() as u64,
                blake3: *blake3::hash(b).as_bytes(),
            })
            .collect(),
        environment: None,
    };
    (rec, MemSource(parts))
}

/// The tiny synthetic recording used for the mutation tests and a golden
/// vector: 3 KiB input, output differing in one place, a small image.
pub fn tiny() -> (Recording, MemSource) {
    let input = gpu_like(3072, 1);
    let mut output = input.clone();
    output[100] ^= 0xff;
    synthetic(
        "tiny_kernel",
        vec![
            (PartRole::Input, input),
            (PartRole::Output, output),
            (PartRole::Image, b"\x7fELF not really an image".to_vec()),
        ],
    )
}

/// Every fixture descriptor under tests/fixtures.
pub fn fixtures() -> Vec<PathBuf> {
    let mut v = rrstore_format::llvm::find_recordings(&rrstore_tests::fixtures()).unwrap();
    v.sort();
    assert!(v.len() >= 10, "expected the fixtures, found {v:?}");
    v
}

/// Write an archive to bytes.
pub fn pack(rec: &Recording, src: &mut dyn PartSource, opts: &WriteOptions) -> Vec<u8> {
    let mut out = Vec::new();
    archive::write(rec, src, &mut out, opts).unwrap();
    out
}

/// Read a whole part through the streaming reader.
pub fn read_stream(r: &mut archive::Reader, role: PartRole) -> io::Result<Vec<u8>> {
    let mut v = Vec::new();
    r.open_part(role)?.read_to_end(&mut v)?;
    Ok(v)
}
