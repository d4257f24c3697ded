//! The report page: sections with the charts inline (inline SVG, so the
//! stylesheet can recolour their text and axes for the dark and print
//! styles), each followed by a table of the same numbers for reading them
//! exactly and for screen readers.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use rrstore_store::label_stats::LabelPoint;
use rrstore_store::HistoryEntry;

use super::charts::{self, Cell, Series, TimePoint};
use super::data::{Gathered, ReportOptions};
use super::stats::spread;
use super::ReportSummary;
use crate::ReportError;

const STYLE: &str = r##"
:root { color-scheme: light dark; --bg: #ffffff; --fg: #1d1f21; --muted: #5f6368; --rule: #d8dadd; --card: #f6f7f8; }
@media (prefers-color-scheme: dark) {
  :root { --bg: #141619; --fg: #e6e8ea; --muted: #a4a9ae; --rule: #30343a; --card: #1c1f23; }
}
* { box-sizing: border-box; }
body { background: var(--bg); color: var(--fg); margin: 0 auto; padding: 1.5em 1em 3em; max-width: 840px;
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; }
h1 { font-size: 1.6em; margin: 0 0 .2em; }
h2 { font-size: 1.25em; margin: 1.8em 0 .4em; padding-bottom: .2em; border-bottom: 1px solid var(--rule); }
h3 { font-size: 1.05em; margin: 1.2em 0 .3em; }
p.meta, p.note { color: var(--muted); margin: .2em 0 .8em; }
code { font-family: "DejaVu Sans Mono", ui-monospace, monospace; font-size: .92em; }
figure.chart { margin: .6em 0 1em; padding: .4em; background: var(--card); border-radius: 6px; }
figure.chart svg { display: block; width: 100%; height: auto; }
figure.chart figcaption { color: var(--muted); font-size: .9em; margin-top: .2em; }
svg text[fill="#000000"] { fill: currentColor; }
svg [stroke="#000000"] { stroke: currentColor; }
table { border-collapse: collapse; width: 100%; margin: .4em 0 1em; font-size: .92em; }
th, td { text-align: left; padding: .25em .5em; border-bottom: 1px solid var(--rule); vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
.swatch { display: inline-block; width: 1.6em; height: .8em; border-radius: 2px; vertical-align: middle; print-color-adjust: exact; -webkit-print-color-adjust: exact; }
.same { color: #2e9d4f; } .changed { color: #d32f2f; font-weight: 600; }
@media print {
  :root { --bg: #ffffff; --fg: #000000; --muted: #444444; --rule: #bbbbbb; --card: #ffffff; }
  body { max-width: none; padding: 0; }
  figure.chart, table, .arena { break-inside: avoid; }
  h2 { break-after: avoid; }
}
"##;

pub(super) fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

fn short_kernel(k: &str) -> String {
    crate::names::short(k).into_owned()
}

fn bytes(n: u64) -> String {
    const U: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < U.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", U[u])
    }
}

fn figure(out: &mut String, id: &str, svg: &str, caption: &str) {
    let _ = writeln!(
        out,
        "<figure class=\"chart\" id=\"{id}\" data-chart=\"{}\">{svg}<figcaption>{}</figcaption></figure>",
        id.split('-').next().unwrap_or(id),
        esc(caption)
    );
}

/// Build the page; returns it and what it holds.
pub fn render(
    g: &Gathered,
    opts: &ReportOptions,
    store_dir: &Path,
) -> Result<(String, ReportSummary), ReportError> {
    let mut summary = ReportSummary {
        recordings: g.recordings.len(),
        replays: g.history.len(),
        ..ReportSummary::default()
    };
    let mut body = String::new();
    kernel_section(g, &mut body, &mut summary)?;
    super::tuning::section(g, &mut body, &mut summary);
    super::compiled::section(g, &mut body);
    output_section(g, &mut body, &mut summary)?;
    arena_section(g, &mut body, &mut summary)?;
    store_section(g, &mut body, &mut summary)?;

    let mut filters = Vec::new();
    if let Some(l) = &opts.label {
        filters.push(format!("label {}", esc(l)));
    }
    if let Some(k) = &opts.kernel {
        filters.push(format!("kernel {}", esc(k)));
    }
    if let Some(s) = opts.since {
        filters.push(format!(
            "since {} UTC",
            crate::time::iso_datetime(s).replace('T', " ")
        ));
    }
    let mut page = String::new();
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n\
         <title>rrstore report</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <h1>rrstore report</h1>\n\
         <p class=\"meta\">Store <code>{}</code>; made {} UTC; {}. \
         {} recording(s), {} kernel(s), {} replay(s).</p>\n{body}</body>\n</html>\n",
        esc(&store_dir.display().to_string()),
        crate::time::iso_datetime(opts.now).replace('T', " "),
        if filters.is_empty() {
            "every recording".to_string()
        } else {
            filters.join(", ")
        },
        summary.recordings,
        summary.kernels,
        summary.replays,
    );
    Ok((page, summary))
}

fn kernel_section(
    g: &Gathered,
    out: &mut String,
    summary: &mut ReportSummary,
) -> Result<(), ReportError> {
    out.push_str("<section id=\"kernel-times\">\n<h2>Kernel time</h2>\n");
    let mut by_kernel: BTreeMap<&str, Vec<&HistoryEntry>> = BTreeMap::new();
    let kernel_of: BTreeMap<String, &str> = g
        .recordings
        .iter()
        .map(|r| (r.id.clone(), r.kernel.as_str()))
        .collect();
    for e in &g.history {
        if e.kernel_ns.is_empty() {
            continue;
        }
        if let Some(k) = kernel_of.get(&e.recording.to_hex()) {
            by_kernel.entry(k).or_default().push(e);
        }
    }
    if by_kernel.is_empty() {
        out.push_str("<p class=\"note\">No replay with a kernel time yet: run <code>rrstore replay</code> or <code>rrstore check</code>.</p>\n");
    }
    for (n, (kernel, runs)) in by_kernel.iter().enumerate() {
        let mut groups: Vec<(String, Vec<(usize, &HistoryEntry)>)> = Vec::new();
        for (i, e) in runs.iter().enumerate() {
            let key = format!(
                "{} · {} · {}",
                g.image_name(&e.recording.to_hex(), &e.image_hash),
                e.device,
                e.backend
            );
            match groups.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push((i + 1, e)),
                None => groups.push((key, vec![(i + 1, e)])),
            }
        }
        let series: Vec<Series> = groups
            .iter()
            .map(|(name, v)| Series {
                name: name.clone(),
                points: v
                    .iter()
                    .filter_map(|(x, e)| {
                        let ms: Vec<f64> = e.kernel_ns.iter().map(|&t| t as f64 / 1e6).collect();
                        let s = spread(&ms)?;
                        Some(TimePoint {
                            x: *x as f64,
                            min: s.min,
                            median: s.median,
                            max: s.max,
                        })
                    })
                    .collect(),
            })
            .collect();
        let short = short_kernel(kernel);
        let _ = writeln!(
            out,
            "<h3><code>{}</code></h3>",
            esc(&crate::names::display(kernel))
        );
        let svg = charts::kernel_times(&short, &series)?;
        let first = runs.first().map_or(0, |e| e.started_at);
        let last = runs.last().map_or(0, |e| e.started_at);
        figure(
            out,
            &format!("kernel-{n}"),
            &svg,
            &format!(
                "{} replay(s) from {} to {} UTC; point: median of the repetitions, bar: min to max.",
                runs.len(),
                crate::time::iso_datetime(first).replace('T', " "),
                crate::time::iso_datetime(last).replace('T', " ")
            ),
        );
        out.push_str("<table><thead><tr><th></th><th>image · device · backend</th><th class=\"num\">replays</th><th class=\"num\">launches</th><th class=\"num\">min ms</th><th class=\"num\">median ms</th><th class=\"num\">mean ± sd ms</th></tr></thead><tbody>\n");
        for (i, (name, v)) in groups.iter().enumerate() {
            let c = charts::series_color(i);
            let all: Vec<f64> = v
                .iter()
                .flat_map(|(_, e)| e.kernel_ns.iter().map(|&t| t as f64 / 1e6))
                .collect();
            if let Some(s) = spread(&all) {
                let _ = writeln!(
                    out,
                    "<tr><td><span class=\"swatch\" style=\"background:#{:02x}{:02x}{:02x}\"></span></td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.3}</td><td class=\"num\">{:.3}</td><td class=\"num\">{:.3} ± {:.3}</td></tr>",
                    c.0,
                    c.1,
                    c.2,
                    esc(name),
                    v.len(),
                    s.n,
                    s.min,
                    s.median,
                    s.mean,
                    s.sd
                );
            }
        }
        out.push_str("</tbody></table>\n");
        summary.kernels += 1;
        summary.charts += 1;
    }
    out.push_str("</section>\n");
    Ok(())
}

fn output_section(
    g: &Gathered,
    out: &mut String,
    summary: &mut ReportSummary,
) -> Result<(), ReportError> {
    out.push_str("<section id=\"output-changes\">\n<h2>Output changes</h2>\n");
    let mut rows = Vec::new();
    let mut cells = Vec::new();
    let mut firsts = Vec::new();
    let mut table = String::new();
    for r in &g.recordings {
        let runs: Vec<&HistoryEntry> = g
            .history
            .iter()
            .filter(|e| e.recording.to_hex() == r.id)
            .collect();
        if runs.is_empty() {
            continue;
        }
        let own = g.recorded_image.get(&r.id).copied().flatten();
        let recorded = g.recorded_output.get(&r.id).copied().flatten();
        // The reference: the recorded output, else its own image's last run.
        let reference = recorded.or_else(|| {
            runs.iter()
                .rev()
                .find(|e| Some(e.image_hash) == own)
                .and_then(|e| e.output_blake3)
        });
        let mut others: Vec<[u8; 32]> = Vec::new();
        let row: Vec<Cell> = g
            .columns
            .iter()
            .map(|c| {
                let image = c.hash.or(own);
                let wanted = |e: &&&HistoryEntry| {
                    Some(e.image_hash) == image && (c.hash.is_none() || Some(e.image_hash) != own)
                };
                let Some(e) = runs.iter().rev().find(wanted) else {
                    return Cell::NotRun;
                };
                match e.output_blake3 {
                    None => Cell::Failed,
                    Some(o) if Some(o) == reference => Cell::Same,
                    Some(o) => {
                        let k = others.iter().position(|x| *x == o).unwrap_or_else(|| {
                            others.push(o);
                            others.len() - 1
                        });
                        Cell::Differs(k)
                    }
                }
            })
            .collect();
        let first = row
            .iter()
            .position(|c| matches!(c, Cell::Differs(_) | Cell::Failed));
        // Outputs that vary between identical replays (`--confirm`): a
        // different output there says nothing of the image.
        let nondet: Vec<String> = runs
            .iter()
            .filter(|e| e.verdict == "nondeterministic")
            .map(|e| format!("h:{}", e.id))
            .collect();
        let nondet = match nondet.last() {
            Some(last) => format!(
                "; <span class=\"changed\">nondeterministic</span>: its output varies between identical replays ({} run(s), the latest {last})",
                nondet.len()
            ),
            None => String::new(),
        };
        let _ = writeln!(
            table,
            "<tr><td><code>{}</code></td><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}{nondet}</td></tr>",
            esc(&short_kernel(&r.kernel)),
            &r.id[..12.min(r.id.len())],
            esc(&r.label),
            if recorded.is_some() { "recorded output" } else { "run of its own image" },
            match first {
                Some(j) => format!(
                    "<span class=\"changed\">{}</span> (last same: {})",
                    esc(&g.columns[j].label),
                    row[..j]
                        .iter()
                        .rposition(|c| *c == Cell::Same)
                        .map_or("none".to_string(), |i| esc(&g.columns[i].label))
                ),
                None => "<span class=\"same\">none</span>".to_string(),
            }
        );
        rows.push(format!(
            "{} ({})",
            short_kernel(&r.kernel),
            &r.id[..8.min(r.id.len())]
        ));
        cells.push(row);
        firsts.push(first);
    }
    if rows.is_empty() {
        out.push_str("<p class=\"note\">No replay yet.</p>\n</section>\n");
        return Ok(());
    }
    let cols: Vec<String> = g.columns.iter().map(|c| c.label.clone()).collect();
    let svg = charts::output_matrix(&rows, &cols, &cells, &firsts)?;
    figure(
        out,
        "outputs-matrix",
        &svg,
        "Each recording's output with each image it ran with (its latest run with each): first its own image, then the other images, oldest first by when they were added; the framed cell is the first image that changed the output, as bisect over that list would find.",
    );
    out.push_str("<table><thead><tr><th>kernel</th><th>recording</th><th>label</th><th>compared with</th><th>first image that changed the output</th></tr></thead><tbody>\n");
    out.push_str(&table);
    out.push_str("</tbody></table>\n</section>\n");
    summary.charts += 1;
    Ok(())
}

fn arena_section(
    g: &Gathered,
    out: &mut String,
    summary: &mut ReportSummary,
) -> Result<(), ReportError> {
    out.push_str("<section id=\"arena-maps\">\n<h2>Differing replays</h2>\n");
    if g.arenas.is_empty() {
        out.push_str("<p class=\"note\">No differing replay with a kept output (<code>check</code> and <code>bisect</code> keep them).</p>\n");
    }
    for (n, m) in g.arenas.iter().enumerate() {
        let _ = writeln!(
            out,
            "<div class=\"arena\"><h3><code>{}</code> with image {} (history row {})</h3>",
            esc(&short_kernel(&m.kernel)),
            esc(&m.image_label),
            m.row
        );
        let svg = charts::arena_map(m)?;
        figure(
            out,
            &format!("arena-{n}"),
            &svg,
            &format!(
                "Arena of {} ({}): {} byte(s) differ in {} range(s); the largest marked in red, argument buffers shaded.",
                bytes(m.arena_size),
                &m.recording[..12.min(m.recording.len())],
                m.differing_bytes,
                m.ranges
            ),
        );
        out.push_str("</div>\n");
        summary.arena_maps += 1;
        summary.charts += 1;
    }
    out.push_str("</section>\n");
    Ok(())
}

fn store_section(
    g: &Gathered,
    out: &mut String,
    summary: &mut ReportSummary,
) -> Result<(), ReportError> {
    out.push_str("<section id=\"store\">\n<h2>Store by label</h2>\n");
    if g.growth.is_empty() {
        out.push_str("<p class=\"note\">No recording.</p>\n</section>\n");
        return Ok(());
    }
    let mut latest: Vec<&LabelPoint> = Vec::new();
    for p in &g.growth {
        match latest.last_mut() {
            Some(l) if l.label == p.label => *l = p,
            _ => latest.push(p),
        }
    }
    figure(
        out,
        "store-growth",
        &charts::label_growth(&g.growth)?,
        "Bytes each label's recordings take in the store (stored: deduplicated and compressed) against their logical size, after each import.",
    );
    figure(
        out,
        "store-ratios",
        &charts::label_ratios(&latest)?,
        "Within each label: dedup = logical / unique chunk bytes, compression = unique / stored bytes.",
    );
    out.push_str("<table><thead><tr><th>label</th><th class=\"num\">recordings</th><th class=\"num\">logical</th><th class=\"num\">unique</th><th class=\"num\">stored</th><th class=\"num\">dedup</th><th class=\"num\">compression</th></tr></thead><tbody>\n");
    for p in &latest {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{:.2}x</td><td class=\"num\">{:.2}x</td></tr>",
            esc(if p.label.is_empty() { "(none)" } else { &p.label }),
            p.recordings,
            bytes(p.logical_bytes),
            bytes(p.unique_bytes),
            bytes(p.stored_bytes),
            p.dedup_ratio(),
            p.compression_ratio()
        );
    }
    out.push_str("</tbody></table>\n</section>\n");
    summary.labels = latest.len();
    summary.charts += 2;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn short_kernel_names_keep_the_function_and_line() {
        assert_eq!(
            super::short_kernel("__omp_offloading_fe00_990821_main_l13"),
            "main_l13"
        );
        assert_eq!(
            super::short_kernel("__omp_offloading_fe00_9ae056__ZL4stepPfS_i_l7"),
            "step(float*, float*, int)_l7"
        );
        assert_eq!(super::esc("<a&\"b\">"), "&lt;a&amp;&quot;b&quot;&gt;");
    }
}
