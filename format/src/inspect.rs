//! Human and JSON descriptions of a recording (`rrstore inspect`, and the
//! store's `show`).
//!
//! [`describe`] decodes a [`Recording`] into a [`Description`]: every
//! argument classified (a pointer into the arena as `arena+offset`, the -1
//! launch-environment sentinel, or a scalar shown as integer and as f32/f64
//! bits), launch configuration, arena, parts, globals, image target and ID.
//! [`render_text`] prints it aligned for people; [`render_json`] prints the
//! stable JSON documented in docs/format-llvm.md (`inspect_version` 1; new
//! fields may be added, existing ones never change meaning).

use serde::Serialize;

use crate::id::hex;
use crate::image::global_refs::{self, GlobalRef};
use crate::llvm::extension;
use crate::model::{Generation, Recording};

/// Version of the JSON schema below.
pub const INSPECT_VERSION: u32 = 1;

/// What an argument value is.
#[derive(Serialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ArgKind {
    /// `ArgPtrs[0] == -1`: the kernel has no launch environment.
    LaunchEnvironmentNone,
    /// Points into the recorded arena.
    Pointer,
    /// The address of a device global in the recording process's copy of
    /// the image ([`crate::image::global_refs`]).
    Global,
    /// Anything else: a by-value scalar (or a pointer outside the arena).
    Scalar,
}

/// One decoded argument.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct ArgDesc {
    pub index: usize,
    pub kind: ArgKind,
    /// The 64-bit value as an unsigned integer (exact).
    pub value: u64,
    /// The same bits as a signed integer.
    pub signed: i64,
    /// `0x` and 16 hex digits.
    pub hex: String,
    /// For pointers: offset from the arena base.
    pub arena_offset: Option<u64>,
    /// For the address of a device global: which, and the offset into it.
    pub global: Option<GlobalRef>,
    /// Low 32 bits read as an IEEE f32 (Rust `{:?}` form: `2.5`, `NaN`, `inf`).
    pub f32: String,
    /// All 64 bits read as an IEEE f64.
    pub f64: String,
    /// `ArgOffsets[index]`.
    pub offset: i64,
    /// Short text: `arena+1048576`, `-1 (no launch environment)`, `262144`.
    pub display: String,
}

#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct LaunchDesc {
    pub num_teams: u64,
    pub num_threads: u64,
    pub shared_memory: u64,
    pub loop_trip_count: u64,
    pub teams_limits: Option<[u64; 2]>,
    pub threads_limits: Option<[u64; 2]>,
}

#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct ArenaDesc {
    pub base: Option<u64>,
    pub base_hex: Option<String>,
    pub size: u64,
    pub reserved: Option<u64>,
}

#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct PartDesc {
    pub role: String,
    /// File name this part has in the recording's own layout.
    pub file: String,
    pub len: u64,
    pub blake3: String,
}

#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct GlobalDesc {
    pub name: String,
    pub size: u64,
    pub data_offset: u64,
}

#[derive(Serialize, Clone, Debug, PartialEq, Eq)]
pub struct ImageDesc {
    /// `x86_64`, `sm_90`, `gfx942`, `ptx`, `fatbin`, `unknown`, `none`.
    pub target: String,
    pub description: String,
}

/// Everything `inspect` shows about a recording.
#[derive(Serialize, Clone, Debug, PartialEq)]
pub struct Description {
    pub inspect_version: u32,
    /// Recording ID (64 hex digits).
    pub id: String,
    pub kernel: String,
    /// `kernel-named-legacy`, `kernel-named` or `native`.
    pub generation: String,
    /// File stem of the recording's files.
    pub stem: String,
    pub device_id: i64,
    pub launch: LaunchDesc,
    pub arena: ArenaDesc,
    pub args: Vec<ArgDesc>,
    pub parts: Vec<PartDesc>,
    pub globals: Vec<GlobalDesc>,
    pub image: ImageDesc,
    /// Descriptor plus parts, uncompressed bytes.
    pub logical_size: u64,
    /// The original descriptor text, verbatim (invalid UTF-8 replaced).
    pub descriptor: String,
    /// Import warnings (empty for archives).
    pub warnings: Vec<String>,
    /// The launch environment stored with the recording (`[name, value]`
    /// pairs), `None` when unknown ([`crate::environment`]).
    pub environment: Option<Vec<(String, String)>>,
}

/// Which LLVM versions wrote a generation.
pub fn generation_llvm(g: Generation) -> &'static str {
    crate::llvm::layouts::of(g).llvm_versions()
}

/// Decode argument `index` of `rec`.
pub fn decode_arg(rec: &Recording, index: usize) -> Option<ArgDesc> {
    let value = *rec.args.get(index)?;
    let arena_offset = rec.arena.offset_of(value);
    let (kind, display) = if index == 0 && value == u64::MAX {
        (
            ArgKind::LaunchEnvironmentNone,
            "-1 (no launch environment)".to_string(),
        )
    } else if let Some(off) = arena_offset {
        (ArgKind::Pointer, format!("arena+{off}"))
    } else {
        let signed = value as i64;
        let text = if signed < 0 {
            format!("{signed}")
        } else {
            format!("{value}")
        };
        (ArgKind::Scalar, text)
    };
    Some(ArgDesc {
        index,
        kind,
        value,
        signed: value as i64,
        hex: format!("{value:#018x}"),
        arena_offset,
        global: None,
        f32: format!("{:?}", f32::from_bits(value as u32)),
        f64: format!("{:?}", f64::from_bits(value)),
        offset: rec.arg_offsets.get(index).copied().unwrap_or(0),
        display,
    })
}

/// Mark the arguments of `d` that are addresses of device globals, read
/// with the recording's `image` ([`crate::image::global_refs`]).
pub fn mark_globals(d: &mut Description, rec: &Recording, image: &[u8]) {
    let refs = global_refs::argument_refs(rec, image);
    for (a, r) in d.args.iter_mut().zip(refs) {
        if let (Some(r), ArgKind::Scalar) = (r, a.kind) {
            a.kind = ArgKind::Global;
            a.display = r.to_string();
            a.global = Some(r);
        }
    }
}

/// Describe a recording (`warnings` from import, if any).
pub fn describe(rec: &Recording, warnings: &[String]) -> Description {
    let l = &rec.launch;
    Description {
        inspect_version: INSPECT_VERSION,
        id: rec.id().to_hex(),
        kernel: rec.kernel.clone(),
        generation: rec.generation.as_str().to_string(),
        stem: rec.stem.clone(),
        device_id: rec.device_id,
        launch: LaunchDesc {
            num_teams: l.num_teams,
            num_threads: l.num_threads,
            shared_memory: l.shared_memory,
            loop_trip_count: l.loop_trip_count,
            teams_limits: l.teams_limits,
            threads_limits: l.threads_limits,
        },
        arena: ArenaDesc {
            base: rec.arena.base,
            base_hex: rec.arena.base.map(|b| format!("{b:#x}")),
            size: rec.arena.size,
            reserved: rec.arena.reserved,
        },
        args: (0..rec.args.len())
            .filter_map(|i| decode_arg(rec, i))
            .collect(),
        parts: rec
            .parts
            .iter()
            .map(|p| PartDesc {
                role: p.role.as_str().to_string(),
                file: format!("{}{}", rec.stem, extension(rec.generation, p.role)),
                len: p.len,
                blake3: hex(&p.blake3),
            })
            .collect(),
        globals: rec
            .globals
            .iter()
            .map(|g| GlobalDesc {
                name: g.name.clone(),
                size: g.size,
                data_offset: g.data_offset,
            })
            .collect(),
        image: ImageDesc {
            target: rec.image_target.short_name(),
            description: rec.image_target.describe(),
        },
        logical_size: rec.logical_size(),
        descriptor: String::from_utf8_lossy(&rec.descriptor).into_owned(),
        warnings: warnings.to_vec(),
        environment: rec.environment.clone(),
    }
}

/// `1234567 B (1.2 MiB)`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64;
    let mut unit = "B";
    for u in UNITS {
        if v < 1024.0 {
            break;
        }
        v /= 1024.0;
        unit = u;
    }
    format!("{n} B ({v:.1} {unit})")
}

/// Left-aligned columns; the last column is not padded.
fn table(rows: &[Vec<String>], indent: &str) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = indent.to_string();
        for (c, cell) in r.iter().enumerate() {
            if c + 1 == r.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.push_str(&" ".repeat(widths[c] - cell.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn limits(l: Option<[u64; 2]>) -> String {
    l.map_or("-".into(), |[a, b]| format!("[{a}, {b}]"))
}

/// The aligned human-readable form.
pub fn render_text(d: &Description) -> String {
    let l = &d.launch;
    let gen_llvm =
        generation_llvm(crate::llvm::layouts::by_name(&d.generation).unwrap_or(Generation::Native));
    let mut head = vec![
        vec!["recording".into(), d.id.clone()],
        vec!["kernel".into(), d.kernel.clone()],
        vec![
            "generation".into(),
            format!("{} ({gen_llvm})", d.generation),
        ],
        vec!["file stem".into(), d.stem.clone()],
        vec!["device id".into(), d.device_id.to_string()],
        vec![
            "launch".into(),
            format!(
                "teams {}, threads {}, shared memory {} B, loop trip count {}",
                l.num_teams, l.num_threads, l.shared_memory, l.loop_trip_count
            ),
        ],
    ];
    if l.teams_limits.is_some() || l.threads_limits.is_some() {
        head.push(vec![
            "limits".into(),
            format!(
                "teams {}, threads {}",
                limits(l.teams_limits),
                limits(l.threads_limits)
            ),
        ]);
    }
    head.push(vec![
        "arena".into(),
        format!(
            "base {}, size {}{}",
            d.arena
                .base_hex
                .as_deref()
                .unwrap_or("unknown (not recorded)"),
            human_bytes(d.arena.size),
            d.arena
                .reserved
                .map_or(String::new(), |r| format!(", reserved {}", human_bytes(r)))
        ),
    ]);
    head.push(vec!["image".into(), d.image.description.clone()]);
    head.push(vec![
        "environment".into(),
        match &d.environment {
            None => "unknown (not recorded by rrstore record)".into(),
            Some(e) if e.is_empty() => "no OpenMP setting".into(),
            Some(e) => crate::environment::text(e),
        },
    ]);
    head.push(vec!["total".into(), human_bytes(d.logical_size)]);
    let mut out = table(&head, "");

    out.push_str(&format!("\narguments ({})\n", d.args.len()));
    let mut rows = vec![vec![
        "#".into(),
        "kind".into(),
        "hex".into(),
        "value".into(),
        "as f32".into(),
        "as f64".into(),
    ]];
    let any_offset = d.args.iter().any(|a| a.offset != 0);
    if any_offset {
        rows[0].push("offset".into());
    }
    for a in &d.args {
        let kind = match a.kind {
            ArgKind::LaunchEnvironmentNone => "launch-env",
            ArgKind::Pointer => "pointer",
            ArgKind::Global => "global",
            ArgKind::Scalar => "scalar",
        };
        let (f32s, f64s) = match a.kind {
            ArgKind::Scalar => (a.f32.clone(), a.f64.clone()),
            _ => ("-".into(), "-".into()),
        };
        let mut r = vec![
            a.index.to_string(),
            kind.into(),
            a.hex.clone(),
            a.display.clone(),
            f32s,
            f64s,
        ];
        if any_offset {
            r.push(a.offset.to_string());
        }
        rows.push(r);
    }
    out.push_str(&table(&rows, "  "));

    out.push_str(&format!("\nparts ({})\n", d.parts.len()));
    let rows: Vec<Vec<String>> = d
        .parts
        .iter()
        .map(|p| {
            vec![
                p.role.clone(),
                p.file.clone(),
                human_bytes(p.len),
                format!("blake3 {}", &p.blake3[..16]),
            ]
        })
        .collect();
    out.push_str(&table(&rows, "  "));

    out.push_str(&format!("\nglobals ({})\n", d.globals.len()));
    let rows: Vec<Vec<String>> = d
        .globals
        .iter()
        .map(|g| {
            vec![
                g.name.clone(),
                human_bytes(g.size),
                format!("at byte {}", g.data_offset),
            ]
        })
        .collect();
    out.push_str(&table(&rows, "  "));

    out.push_str("\ndescriptor\n  ");
    out.push_str(d.descriptor.trim_end());
    out.push('\n');
    if !d.warnings.is_empty() {
        out.push_str("\nwarnings\n");
        for w in &d.warnings {
            out.push_str(&format!("  {w}\n"));
        }
    }
    out
}

/// The stable JSON form (pretty-printed).
pub fn render_json(d: &Description) -> String {
    // A plain struct of strings and integers always serializes.
    serde_json::to_string_pretty(d).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Arena, LaunchConfig};

    fn rec() -> Recording {
        Recording {
            kernel: "k".into(),
            generation: Generation::KernelNamed,
            stem: "k".into(),
            args: vec![u64::MAX, 0x1000, 0x4020_0000, u64::MAX - 1, 0x1010],
            arg_offsets: vec![0; 5],
            launch: LaunchConfig::default(),
            device_id: 0,
            arena: Arena {
                base: Some(0x1000),
                size: 16,
                reserved: None,
            },
            globals: vec![],
            image_target: Default::default(),
            descriptor: b"{}".to_vec(),
            parts: vec![],
            environment: None,
        }
    }

    #[test]
    fn arguments_are_classified() {
        let r = rec();
        let a: Vec<_> = (0..5).map(|i| decode_arg(&r, i).unwrap()).collect();
        assert_eq!(a[0].kind, ArgKind::LaunchEnvironmentNone);
        assert_eq!(a[1].display, "arena+0");
        assert_eq!(a[2].kind, ArgKind::Scalar);
        assert_eq!(a[2].f32, "2.5");
        assert_eq!(a[3].display, "-2");
        assert_eq!(a[4].kind, ArgKind::Scalar, "one past the arena end");
        let text = render_text(&describe(&r, &[]));
        assert!(text.contains("arena+0"), "{text}");
    }
}
