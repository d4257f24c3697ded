//! IR for the GPU targets compiles on a machine without a GPU (issue 41,
//! item 2): `nvptx64` IR to PTX the CUDA driver can JIT (its `.target` the
//! asked SM, a PTX ISA version the SM accepts, the kernel an `.entry`),
//! `amdgcn` IR to a code object (an AMDGPU ELF exporting the kernel and
//! its descriptor). The kernels are written here as CUDA/HIP device code
//! and compiled to IR by Debian's clang-22. Running them needs a GPU:
//! scripts/gpu-check.sh.

use std::path::Path;
use std::process::Command;

use rrstore_format::image::{detect, ImageTarget};
use rrstore_replay::compile::{compile, CompileOptions};

const CLANG: &str = "/usr/lib/llvm-22/bin/clang";
const KERNEL: &str = "__omp_offloading_test_k";

fn device_ir(dir: &Path, lang: &str, arch_flags: &[&str]) -> Vec<u8> {
    let src = dir.join("k.cu");
    std::fs::write(
        &src,
        format!("extern \"C\" __attribute__((global)) void {KERNEL}(int *p) {{ p[0] = 1; }}\n"),
    )
    .unwrap();
    let ll = dir.join(format!("k-{lang}.ll"));
    let o = Command::new(CLANG)
        .args(["-x", lang, "--cuda-device-only", "-O1", "-emit-llvm", "-S"])
        .args(arch_flags)
        .arg(&src)
        .arg("-o")
        .arg(&ll)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bc = dir.join(format!("k-{lang}.bc"));
    let st = Command::new("/usr/lib/llvm-22/bin/llvm-as")
        .arg(&ll)
        .arg("-o")
        .arg(&bc)
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::read(&bc).unwrap()
}

#[test]
fn nvptx64_ir_compiles_to_ptx_for_the_asked_sm() {
    let dir = tempfile::tempdir().unwrap();
    let ir = device_ir(
        dir.path(),
        "cuda",
        &[
            "--cuda-gpu-arch=sm_90",
            "-nocudainc",
            "-nocudalib",
            "-Xclang",
            "-target-feature",
            "-Xclang",
            "+ptx80",
        ],
    );
    let opts = CompileOptions {
        arch: Some("sm_90".into()),
        cache_dir: Some(dir.path().join("cache")),
        unconfined: true,
        ..CompileOptions::default()
    };
    let c = compile(&ir, KERNEL, &opts).unwrap();
    let ptx = String::from_utf8(c.bytes.clone()).unwrap();
    assert!(ptx.contains(".target sm_90"), "{ptx}");
    assert!(ptx.contains(&format!(".entry {KERNEL}")), "{ptx}");
    assert_eq!(
        detect(&c.bytes[..c.bytes.len().min(4096)]),
        ImageTarget::Ptx {
            target: Some("sm_90".into())
        }
    );
    assert_eq!(c.provenance.target, "nvptx64:sm_90");
    // Without an architecture there is nothing to compile for.
    let e = compile(
        &ir,
        KERNEL,
        &CompileOptions {
            arch: None,
            ..opts.clone()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("needs a GPU architecture"), "{e}");
}

#[test]
fn amdgcn_ir_compiles_to_a_code_object_for_the_asked_gfx() {
    let dir = tempfile::tempdir().unwrap();
    let ir = device_ir(
        dir.path(),
        "hip",
        &["--offload-arch=gfx942", "-nogpuinc", "-nogpulib"],
    );
    let opts = CompileOptions {
        arch: Some("gfx942".into()),
        cache_dir: Some(dir.path().join("cache")),
        unconfined: true,
        ..CompileOptions::default()
    };
    let c = compile(&ir, KERNEL, &opts).unwrap();
    match detect(&c.bytes[..c.bytes.len().min(4096)]) {
        ImageTarget::Amdgpu { gfx, .. } => assert_eq!(gfx, "gfx942"),
        other => panic!("not an AMDGPU code object: {other:?}"),
    }
    let elf = rrstore_format::image::elf::parse(&c.bytes).unwrap();
    assert!(elf.symbol(KERNEL).is_some());
    assert!(elf.symbol(&format!("{KERNEL}.kd")).is_some());
    assert_eq!(c.provenance.target, "amdgcn:gfx942");
}
