//! Baseline for bench/remote.sh: upload the bytes of FILE to an S3 endpoint
//! with the same client library and settings as rrstore's remotes
//! (object_store, tokio), as one PUT and as 64 KiB objects with 16 in
//! flight (rrstore's chunk size and concurrency).
//!
//! usage: remote_put ENDPOINT BUCKET FILE...   (AWS_ACCESS_KEY_ID etc. set)

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt, PutPayload};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [endpoint, bucket, files @ ..] = &args[..] else {
        return Err("usage: remote_put ENDPOINT BUCKET FILE...".into());
    };
    let mut data = Vec::new();
    for f in files {
        data.extend(std::fs::read(f)?);
    }
    let s3: Arc<dyn ObjectStore> = Arc::new(
        AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_endpoint(endpoint)
            .with_region("us-east-1")
            .with_client_options(ClientOptions::new().with_allow_http(true))
            .build()?,
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let mb = data.len() as f64 / 1e6;
    let t = Instant::now();
    rt.block_on(s3.put(&Path::from("baseline/one"), PutPayload::from(data.clone())))?;
    let one = t.elapsed().as_secs_f64();
    println!(
        "single PUT: {mb:.1} MB in {one:.2} s = {:.1} MB/s",
        mb / one
    );
    let t = Instant::now();
    let pieces: Vec<Vec<u8>> = data.chunks(64 << 10).map(<[u8]>::to_vec).collect();
    let n = pieces.len();
    rt.block_on(async {
        let mut s = futures::stream::iter(pieces.into_iter().enumerate())
            .map(|(i, p)| {
                let s3 = s3.clone();
                async move {
                    s3.put(&Path::from(format!("baseline/p/{i}")), PutPayload::from(p))
                        .await
                }
            })
            .buffer_unordered(16);
        while let Some(r) = s.next().await {
            r?;
        }
        Ok::<(), object_store::Error>(())
    })?;
    let many = t.elapsed().as_secs_f64();
    println!(
        "{n} x 64 KiB PUTs, 16 in flight: {mb:.1} MB in {many:.2} s = {:.1} MB/s",
        mb / many
    );
    Ok(())
}
