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

/// A sysfs tree holding a virtio balloon with `features` and, when given,
/// a huge page pool of (total, free) pages.
fn sysfs(features: &str, pool: Option<(u64, u64)>) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let b = d.path().join("bus/virtio/devices/virtio0");
    std::fs::create_dir_all(&b).unwrap();
    std::fs::write(b.join("device"), "0x0005\n").unwrap();
    std::fs::write(b.join("features"), format!("{features}\n")).unwrap();
    if let Some((total, free)) = pool {
        let p = d.path().join("kernel/mm/hugepages/hugepages-2048kB");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("nr_hugepages"), format!("{total}\n")).unwrap();
        std::fs::write(p.join("free_hugepages"), format!("{free}\n")).unwrap();
    }
    d
}

fn devices_with_sysfs(root: &std::path::Path, json: bool) -> String {
    let mut args = vec!["devices"];
    if json {
        args.push("--json");
    }
    let o = store_common::command()
        .args(&args)
        .env("RRSTORE_DEBUG_SYSFS", root)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// A VM that hands free memory back to its host is named, with the pool
/// that avoids the slow fills, in text and JSON (host entry only).
#[test]
fn memory_line_names_free_page_reporting_and_the_pool() {
    // Bit 5 (VIRTIO_BALLOON_F_REPORTING) set, no pool: told what to reserve.
    let vm = sysfs("01100101000000000000000000000000", None);
    let out = devices_with_sysfs(vm.path(), false);
    let line = out.lines().find(|l| l.starts_with("memory: ")).expect(&out);
    assert!(line.contains("free page reporting"), "{line}");
    assert!(line.contains("sysctl vm.nr_hugepages=N"), "{line}");
    let v: serde_json::Value = serde_json::from_str(&devices_with_sysfs(vm.path(), true)).unwrap();
    assert_eq!(
        v[0]["memory"],
        serde_json::json!({"free_page_reporting": true, "pool_pages": 0, "pool_free_pages": 0})
    );
    assert!(
        v[1].get("memory").is_none() && v[2].get("memory").is_none(),
        "{v}"
    );
    // With a pool: its free pages, no advice.
    let pooled = sysfs("01100101", Some((64, 40)));
    let out = devices_with_sysfs(pooled.path(), false);
    assert!(
        out.contains("huge page pool: 40 of 64 pages of 2 MiB free"),
        "{out}"
    );
    assert!(!out.contains("sysctl"), "{out}");
    // A balloon without the reporting bit: no claim about the host.
    let plain = sysfs("01100001", None);
    let out = devices_with_sysfs(plain.path(), false);
    assert!(
        out.contains("memory: no huge page pool reserved; arenas use transparent huge pages"),
        "{out}"
    );
}
