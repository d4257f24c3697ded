//! The offload reader against real clang-22 builds (an executable, an
//! `-fopenmp-target-jit` executable, a shared library, an object), checked
//! against what LLVM's own tools say of the same files:
//! `llvm-objdump --offloading` (kind, arch, triple, producer of each entry)
//! and `llvm-offload-binary` (the bytes of the image it extracts).

use std::path::Path;
use std::process::Command;

use rrstore_format::offload::{container, Entry, ImageKind};
use rrstore_tests::offload::{Source, LLVM};

const PROGRAM: &str = r#"
#include <cstdio>
int main() {
  float x[64];
#pragma omp target teams distribute parallel for map(from : x)
  for (int i = 0; i < 64; i++) x[i] = 2.0f * i;
  printf("%.1f\n", x[5]);
  return 0;
}
"#;

/// (kind, arch, triple, producer) per image, as llvm-objdump prints them.
fn objdump(file: &Path) -> Vec<[String; 4]> {
    let o = Command::new(format!("{LLVM}/bin/llvm-objdump"))
        .arg("--offloading")
        .arg(file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut out = Vec::new();
    for block in text.split("OFFLOADING IMAGE [").skip(1) {
        let field = |k: &str| {
            block
                .lines()
                .find_map(|l| l.strip_prefix(k).map(|v| v.trim().to_string()))
                .unwrap_or_default()
        };
        out.push([
            field("kind"),
            field("arch"),
            field("triple"),
            field("producer"),
        ]);
    }
    out
}

/// The image llvm-offload-binary extracts for the entry's triple and arch.
fn extracted(file: &Path, e: &Entry, dir: &Path) -> Vec<u8> {
    let out = dir.join("extracted");
    let o = Command::new(format!("{LLVM}/bin/llvm-offload-binary"))
        .arg(file)
        .arg(format!(
            "--image=file={},triple={},arch={}",
            out.display(),
            e.triple(),
            e.arch()
        ))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read(&out).unwrap()
}

#[test]
fn real_builds_parse_as_llvm_tools_read_them() {
    let dir = tempfile::tempdir().unwrap();
    let src = Source::new(&dir.path().join("src"), "twice.cpp", PROGRAM);
    let builds: [(&str, &[&str], ImageKind); 4] = [
        ("app", &[], ImageKind::Object),
        ("app-jit", &["-fopenmp-target-jit"], ImageKind::Bitcode),
        ("libtwice.so", &["-fPIC", "-shared"], ImageKind::Object),
        ("twice.o", &["-c"], ImageKind::Object),
    ];
    for (name, flags, kind) in builds {
        let path = dir.path().join(name);
        src.build(&path, flags);
        let file = std::fs::read(&path).unwrap();
        let found = container::find(&file)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .unwrap_or_else(|| panic!("{name}: no offloading section found"));
        assert_eq!(
            found.container,
            container::Container::Elf { sections: 1 },
            "{name}"
        );
        let ours: Vec<[String; 4]> = found
            .entries
            .iter()
            .map(|e| {
                [
                    e.image_kind.name(),
                    e.arch().to_string(),
                    e.triple().to_string(),
                    e.offload_kind.name(),
                ]
            })
            .collect();
        assert_eq!(ours, objdump(&path), "{name}");
        assert_eq!(found.entries.len(), 1, "{name}");
        let e = &found.entries[0];
        assert_eq!(e.image_kind, kind, "{name}");
        assert_eq!(e.triple(), "x86_64-pc-linux-gnu");
        let image = e.image_bytes(&file);
        assert_eq!(image, extracted(&path, e, dir.path()), "{name}");
        match kind {
            ImageKind::Bitcode => assert!(image.starts_with(b"BC\xc0\xde"), "{name}"),
            _ if name.ends_with(".o") => assert_eq!(e.arch(), "generic"),
            _ => {
                // A linked device image: the host plugin's shared object,
                // exporting the kernel entry point.
                let elf = rrstore_format::image::elf::parse(image).unwrap();
                assert!(
                    elf.symbols
                        .iter()
                        .any(|s| s.name.starts_with("__omp_offloading_")),
                    "{name}"
                );
            }
        }
    }
}
