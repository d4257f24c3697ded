//! What the HTML report shows, read from the store: the matching
//! recordings, their replay history, the images, each label's growth, and
//! for differing replays whose output was kept, the differing ranges.
//! Nothing here replays anything or writes to the store.

use std::collections::{BTreeMap, HashMap};

use rrstore_format::PartRole;
use rrstore_replay::regress::diff::{diff, DiffOptions};
use rrstore_replay::regress::run::RunOptions;
use rrstore_replay::verify::ranges::Range as DiffRange;
use rrstore_replay::verify::{arg_pointers, ArgPointer};
use rrstore_store::label_stats::LabelPoint;
use rrstore_store::{HistoryEntry, LsFilter, RecordingSummary, Store};

use crate::ReportError;

/// Which part of the store the report covers.
#[derive(Clone, Debug, Default)]
pub struct ReportOptions {
    /// Shell glob on the label.
    pub label: Option<String>,
    /// Shell glob on the kernel name.
    pub kernel: Option<String>,
    /// Only replays (and imports) since this Unix time.
    pub since: Option<i64>,
    /// Unix seconds the report is made at (printed in it).
    pub now: i64,
}

/// At most this many arena maps (the newest differing replays).
pub const MAX_ARENA_MAPS: usize = 6;

/// A column of the output-change matrix.
#[derive(Clone, Debug)]
pub struct ImageColumn {
    /// None: each recording's own image.
    pub hash: Option<[u8; 32]>,
    /// Its `image add` label, else its hash prefix; `own image`.
    pub label: String,
}

/// One differing replay's arena.
#[derive(Clone, Debug)]
pub struct ArenaMap {
    pub recording: String,
    pub kernel: String,
    pub row: i64,
    pub image_label: String,
    pub arena_size: u64,
    /// Argument buffers: (argument index, start offset, end offset).
    pub buffers: Vec<(usize, u64, u64)>,
    pub differing_bytes: u64,
    pub ranges: u64,
    /// The largest differing ranges (all when few).
    pub largest: Vec<DiffRange>,
}

/// Everything gathered.
pub struct Gathered {
    pub recordings: Vec<RecordingSummary>,
    /// Replays of those recordings, oldest first.
    pub history: Vec<HistoryEntry>,
    /// Recording ID (hex) -> its recorded output's hash.
    pub recorded_output: HashMap<String, Option<[u8; 32]>>,
    /// Recording ID (hex) -> its own image's hash.
    pub recorded_image: HashMap<String, Option<[u8; 32]>>,
    /// Image hash -> label, for every stored image.
    pub image_labels: HashMap<[u8; 32], String>,
    /// Columns of the output matrix, oldest image first.
    pub columns: Vec<ImageColumn>,
    pub growth: Vec<LabelPoint>,
    pub arenas: Vec<ArenaMap>,
}

impl Gathered {
    /// An image's label for the charts: its stored label, `recorded`, or
    /// its hash prefix.
    pub fn image_name(&self, rec: &str, hash: &[u8; 32]) -> String {
        if let Some(l) = self.image_labels.get(hash).filter(|l| !l.is_empty()) {
            return l.clone();
        }
        if self.recorded_image.get(rec).copied().flatten() == Some(*hash) {
            return "recorded".into();
        }
        rrstore_replay::regress::short(hash)
    }
}

/// Read what the report shows.
pub fn gather(store: &mut Store, opts: &ReportOptions) -> Result<Gathered, ReportError> {
    let recordings = store.list(&LsFilter {
        kernel: opts.kernel.clone(),
        label: opts.label.clone(),
        sort: rrstore_store::LsSort::Name,
        ..LsFilter::default()
    })?;
    let mut recorded_output = HashMap::new();
    let mut recorded_image = HashMap::new();
    for r in &recordings {
        let id = store.resolve(&r.id)?;
        let rec = store.recording(&id)?;
        recorded_output.insert(r.id.clone(), rec.part(PartRole::Output).map(|p| p.blake3));
        recorded_image.insert(r.id.clone(), store.recording_image_hash(&id)?);
    }
    let since = opts.since.unwrap_or(i64::MIN);
    let history: Vec<HistoryEntry> = store
        .history(None)?
        .into_iter()
        .filter(|e| e.started_at >= since && recorded_output.contains_key(&e.recording.to_hex()))
        .collect();
    let images = store.images()?;
    let image_labels: HashMap<[u8; 32], String> = images
        .iter()
        .map(|i| (i.hash_bytes(), i.label.clone()))
        .collect();
    // Position in `images()`: by when added, then by label.
    let added: HashMap<[u8; 32], i64> = images
        .iter()
        .enumerate()
        .map(|(n, i)| (i.hash_bytes(), n as i64))
        .collect();
    // Columns: each recording's own image (one column for all), then every
    // other image run, by when it was added (oldest build first, then by
    // label), then images never added by their first run.
    let mut first_run: BTreeMap<[u8; 32], (u8, i64, i64)> = BTreeMap::new();
    let mut any_own = false;
    for e in &history {
        let own =
            recorded_image.get(&e.recording.to_hex()).copied().flatten() == Some(e.image_hash);
        if own {
            any_own = true;
            continue;
        }
        let key = match added.get(&e.image_hash) {
            Some(&n) => (0, n, 0),
            None => (1, e.started_at, e.id),
        };
        first_run
            .entry(e.image_hash)
            .and_modify(|k| *k = (*k).min(key))
            .or_insert(key);
    }
    let mut cols: Vec<([u8; 32], (u8, i64, i64))> = first_run.into_iter().collect();
    cols.sort_by_key(|(_, k)| *k);
    let mut gathered = Gathered {
        recordings,
        history,
        recorded_output,
        recorded_image,
        image_labels,
        columns: Vec::new(),
        growth: store
            .label_growth(opts.label.as_deref())?
            .into_iter()
            .filter(|p| p.at >= since)
            .collect(),
        arenas: Vec::new(),
    };
    gathered.columns = any_own
        .then(|| ImageColumn {
            hash: None,
            label: "own image".into(),
        })
        .into_iter()
        .chain(cols.into_iter().map(|(hash, _)| ImageColumn {
            hash: Some(hash),
            label: match gathered.image_labels.get(&hash) {
                Some(l) if !l.is_empty() => l.clone(),
                _ => rrstore_replay::regress::short(&hash),
            },
        }))
        .collect();
    gathered.arenas = arena_maps(store, &gathered)?;
    Ok(gathered)
}

/// The newest differing replay with a kept output, per recording.
fn arena_maps(store: &mut Store, g: &Gathered) -> Result<Vec<ArenaMap>, ReportError> {
    let mut picked: Vec<&HistoryEntry> = Vec::new();
    for e in g.history.iter().rev() {
        let rec = e.recording.to_hex();
        let recorded = g.recorded_output.get(&rec).copied().flatten();
        let differs = matches!((e.output_blake3, recorded), (Some(a), Some(b)) if a != b);
        if differs
            && !picked.iter().any(|p| p.recording == e.recording)
            && store.saved_output(e.id)?.is_some()
        {
            picked.push(e);
        }
        if picked.len() == MAX_ARENA_MAPS {
            break;
        }
    }
    let opts = DiffOptions {
        part: PartRole::Output,
        dtype: None,
        rtol: 0.0,
        atol: 0.0,
        // Only rows with a kept output are compared: nothing is re-run.
        run: RunOptions {
            replay: rrstore_replay::ReplayOptions::default(),
            use_cache: true,
            keep_output: false,
        },
    };
    let mut out = Vec::new();
    for e in picked {
        let rec_hex = e.recording.to_hex();
        let d = diff(store, &rec_hex, &format!("h:{}", e.id), &opts).map_err(|source| {
            ReportError::Diff {
                row: e.id,
                source: Box::new(source),
            }
        })?;
        let Some(m) = d.arena.mismatch else { continue };
        let rec = store.recording(&e.recording)?;
        let size = rec.arena.size;
        let ptrs: Vec<ArgPointer> = arg_pointers(&rec.args, rec.arena.base.unwrap_or(0), size);
        let buffers = ptrs
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let end = ptrs.get(i + 1).map_or(size, |n| n.offset);
                (p.index, p.offset, end)
            })
            .filter(|(_, a, b)| b > a)
            .collect();
        out.push(ArenaMap {
            kernel: rec.kernel.clone(),
            recording: rec_hex.clone(),
            row: e.id,
            image_label: g.image_name(&rec_hex, &e.image_hash),
            arena_size: size,
            buffers,
            differing_bytes: m.differing_bytes,
            ranges: m.ranges,
            largest: m.largest,
        });
    }
    Ok(out)
}
