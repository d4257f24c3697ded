//! `rrstore devices` through the real binary: on a machine without a GPU
//! driver it lists the host, says why CUDA and HIP are not usable, and exits 0.

mod store_common;

fn rrstore(args: &[&str]) -> std::process::Output {
    store_common::command().args(args).output().unwrap()
}

fn have(paths: &[&str]) -> bool {
    paths.iter().any(|p| {
        [
            "/usr/lib/x86_64-linux-gnu",
            "/usr/lib64",
            "/usr/lib",
            "/opt/rocm/lib",
        ]
        .iter()
        .any(|d| std::path::Path::new(d).join(p).exists())
    })
}

fn no_cuda() -> bool {
    !have(&["libcuda.so", "libcuda.so.1"])
}

fn no_hip() -> bool {
    !have(&["libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.7"])
}

#[test]
fn text_lists_host_and_explains_missing_drivers() {
    let o = rrstore(&["devices"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("host  available"), "{out}");
    assert!(out.contains("cores"), "{out}");
    if no_cuda() {
        assert!(out.contains("cuda  not available"), "{out}");
        assert!(out.contains("libcuda.so"), "{out}");
    }
    if no_hip() {
        assert!(out.contains("hip   not available"), "{out}");
        assert!(out.contains("libamdhip64.so"), "{out}");
    }
    if no_cuda() && no_hip() {
        assert!(out.contains("No GPU backend is usable"), "{out}");
    }
}

#[test]
fn json_is_an_array_of_backends() {
    let o = rrstore(&["devices", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let arr = v.as_array().unwrap();
    let names: Vec<_> = arr.iter().map(|b| b["backend"].as_str().unwrap()).collect();
    assert_eq!(names, ["host", "cuda", "hip"]);
    assert_eq!(arr[0]["available"], true);
    assert!(arr[0]["devices"][0]["cores"].as_u64().unwrap() >= 1);
    if no_cuda() {
        assert_eq!(arr[1]["available"], false);
        assert!(arr[1]["reason"].as_str().unwrap().contains("libcuda.so"));
        assert!(arr[1]["devices"].as_array().unwrap().is_empty());
    }
    if no_hip() {
        assert_eq!(arr[2]["available"], false);
        assert!(arr[2]["reason"].as_str().unwrap().contains("ROCm"));
    }
}

/// `rrstore devices` with the runtime search (test hook
/// RRSTORE_RUNTIME_SEARCH) limited to `dir`.
fn devices_searching(dir: &std::path::Path) -> serde_json::Value {
    let o = store_common::command()
        .args(["devices", "--json"])
        .env("RRSTORE_RUNTIME_SEARCH", dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

#[test]
fn host_is_unavailable_without_an_offload_runtime() {
    let t = tempfile::tempdir().unwrap();
    let host = &devices_searching(t.path())[0];
    assert_eq!(host["available"], false, "{host}");
    let why = host["reason"].as_str().unwrap();
    assert!(
        why.contains("no OpenMP offload runtime") && why.contains("libomp5-19"),
        "{why}"
    );
    // The text form says so too.
    let o = store_common::command()
        .arg("devices")
        .env("RRSTORE_RUNTIME_SEARCH", t.path())
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("host  not available: no OpenMP offload runtime"),
        "{out}"
    );
    // With one (a versioned LLVM directory's, say): available, and named.
    std::fs::write(t.path().join("libomptarget.so.19.1"), b"").unwrap();
    let host = &devices_searching(t.path())[0];
    assert_eq!(host["available"], true, "{host}");
    assert!(
        host["runtime"]
            .as_str()
            .unwrap()
            .contains("libomptarget.so.19.1"),
        "{host}"
    );
}
