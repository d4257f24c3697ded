//! Upload bandwidth of the CUDA backend's staging path alone (no store, no
//! decompression): a 1 GiB buffer already in memory is uploaded into an
//! arena in pieces of 1, 8 and 64 MiB, best of 3 each. Used by
//! scripts/gpu-check.sh to separate the backend's share of rehydration from
//! the store's. Usage: gpu_upload [bytes] [base address, hex]

use rrstore_replay::backend::gpu::cuda::CudaBackend;
use rrstore_replay::backend::Backend;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let size: usize = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(1 << 30);
    let base = match args.next() {
        Some(h) => u64::from_str_radix(h.trim_start_matches("0x"), 16)?,
        None => 0x7d00_0000_0000,
    };
    let mut b = CudaBackend::open(0, Some((base, size as u64)))?;
    b.reserve(base, size as u64)?;
    let data: Vec<u8> = (0..size).map(|i| (i * 2_654_435_761) as u8).collect();
    for piece in [1usize << 20, 8 << 20, 64 << 20] {
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t0 = std::time::Instant::now();
            let mut off = 0;
            while off < size {
                let n = piece.min(size - off);
                b.upload(off as u64, &data[off..off + n])?;
                off += n;
            }
            best = best.min(t0.elapsed().as_secs_f64());
        }
        println!(
            "backend_upload piece={} MiB bytes={size} best_s={best:.6} gbps={:.2}",
            piece >> 20,
            size as f64 / best / 1e9
        );
    }
    let mut back = vec![0u8; 4096];
    b.download((size - 4096) as u64, &mut back)?;
    assert_eq!(
        back[..],
        data[size - 4096..],
        "uploaded bytes read back differently"
    );
    Ok(())
}
