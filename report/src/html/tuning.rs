//! The report's "Tuning by launch configuration" section: for each kernel
//! replayed with more than one launch configuration or image (what
//! `rrstore tune` writes, or replays with `--num-threads` and `--image`),
//! a bar chart of the median kernel time of each (team count, thread
//! count, overrides, image), the ones whose output did not verify marked
//! and never called the fastest, and a table of the same numbers with the
//! speedup over the recorded launch.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use rrstore_store::HistoryEntry;

use super::data::Gathered;
use super::ReportSummary;

/// One launch configuration of one kernel, over its history rows.
struct Config {
    label: String,
    recorded: bool,
    replays: usize,
    /// Kernel times of the verified rows.
    times: Vec<u64>,
    /// Verdicts of the rows that did not verify.
    failed: Vec<String>,
}

/// Team count, thread count, launch overrides of a history row.
type Launch<'a> = (Option<u64>, Option<u64>, &'a str);

fn verified(e: &HistoryEntry) -> bool {
    matches!(e.verdict.as_str(), "verified" | "within-tolerance")
}

fn median(v: &[u64]) -> Option<u64> {
    let mut s = v.to_vec();
    s.sort_unstable();
    s.get(s.len().checked_sub(1)? / 2).copied()
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The configurations of `rec` a tune compares: those of every image run
/// with several launch configurations, and, when there are several, those
/// of the images that are no stored build (the recorded image and the IR
/// compiled with tune's compile variants). A stored build run once per
/// launch (`check --image`) belongs to the other sections.
fn configs(g: &Gathered, rec: &str) -> Vec<Config> {
    let rows: Vec<&HistoryEntry> = g
        .history
        .iter()
        .filter(|e| e.recording.to_hex() == rec)
        .collect();
    let mut launches: BTreeMap<[u8; 32], Vec<Launch>> = BTreeMap::new();
    for e in &rows {
        let l = launches.entry(e.image_hash).or_default();
        let k = (e.num_teams, e.num_threads, e.launch_overrides.as_str());
        if !l.contains(&k) {
            l.push(k);
        }
    }
    let recorded = g.recorded_image.get(rec).copied().flatten();
    let unstored =
        |h: &[u8; 32]| recorded == Some(*h) || g.image_labels.get(h).is_none_or(|l| l.is_empty());
    // Rows that stopped before an image loaded (hash 0) show, but do not
    // make a recording tuned.
    let compiled = launches
        .keys()
        .filter(|h| **h != [0; 32] && unstored(h))
        .count();
    let shown = |h: &[u8; 32]| {
        launches.get(h).is_some_and(|l| l.len() > 1) || (compiled > 1 && unstored(h))
    };
    let mut by: BTreeMap<(String, Option<u64>, Option<u64>, String), Config> = BTreeMap::new();
    for e in rows.into_iter().filter(|e| shown(&e.image_hash)) {
        let image = g.image_name(rec, &e.image_hash);
        let key = (
            image.clone(),
            e.num_teams,
            e.num_threads,
            e.launch_overrides.clone(),
        );
        let c = by.entry(key).or_insert_with(|| Config {
            label: format!(
                "{}x{} {} · {image}",
                e.num_teams.map_or("?".into(), |n| n.to_string()),
                e.num_threads.map_or("?".into(), |n| n.to_string()),
                if e.launch_overrides.is_empty() {
                    "(recorded launch)"
                } else {
                    e.launch_overrides.as_str()
                },
            ),
            recorded: e.launch_overrides.is_empty() && image == "recorded",
            replays: 0,
            times: Vec::new(),
            failed: Vec::new(),
        });
        c.replays += 1;
        if verified(e) {
            c.times.extend_from_slice(&e.kernel_ns);
        } else if !c.failed.contains(&e.verdict) {
            c.failed.push(e.verdict.clone());
        }
    }
    by.into_values().collect()
}

/// A horizontal bar per configuration (median ms); not verified: a thin
/// red bar at the full width, labelled.
fn chart(cs: &[Config]) -> String {
    let max = cs
        .iter()
        .filter_map(|c| median(&c.times))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let (w, row) = (800.0, 22.0);
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {}\" role=\"img\">",
        row * cs.len() as f64 + 4.0
    );
    for (i, c) in cs.iter().enumerate() {
        let y = i as f64 * row + 2.0;
        let _ = write!(
            s,
            "<text x=\"0\" y=\"{}\" font-size=\"11\" fill=\"#000000\">{}</text>",
            y + 14.0,
            esc(&c.label)
        );
        match median(&c.times) {
            Some(m) => {
                let bw = (m as f64 / max) * 380.0;
                let _ = write!(
                    s,
                    "<rect x=\"360\" y=\"{y}\" width=\"{bw:.1}\" height=\"16\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{}\" font-size=\"11\" fill=\"#000000\">{:.3} ms</text>",
                    if c.recorded { "#7a7f85" } else { "#2e9d4f" },
                    364.0 + bw,
                    y + 13.0,
                    m as f64 / 1e6
                );
            }
            None => {
                let _ = write!(
                    s,
                    "<rect x=\"360\" y=\"{}\" width=\"380\" height=\"3\" fill=\"#d32f2f\"/><text x=\"364\" y=\"{}\" font-size=\"11\" fill=\"#d32f2f\">{} (never chosen)</text>",
                    y + 13.0,
                    y + 11.0,
                    esc(&c.failed.join(", "))
                );
            }
        }
    }
    s.push_str("</svg>");
    s
}

/// The section; nothing when no kernel ran in several configurations.
pub fn section(g: &Gathered, out: &mut String, summary: &mut ReportSummary) {
    let mut body = String::new();
    for r in &g.recordings {
        let cs = configs(g, &r.id);
        if cs.len() < 2 {
            continue;
        }
        let base = cs
            .iter()
            .find(|c| c.recorded)
            .and_then(|c| median(&c.times));
        let best = cs
            .iter()
            .filter_map(|c| median(&c.times).map(|m| (m, c.label.as_str())))
            .min();
        let _ = writeln!(
            body,
            "<h3><code>{}</code> <span class=\"meta\">{}</span></h3>",
            esc(&r.kernel),
            esc(&r.id[..12.min(r.id.len())])
        );
        let _ = writeln!(
            body,
            "<figure class=\"chart\" id=\"tuning-{}\" data-chart=\"tuning\">{}<figcaption>median kernel time per launch configuration and image (verified replays; grey: the recorded launch); fastest verified: {}</figcaption></figure>",
            esc(&r.id),
            chart(&cs),
            esc(best.map_or("none", |b| b.1))
        );
        body.push_str("<table><thead><tr><th>configuration · image</th><th class=\"num\">replays</th><th class=\"num\">launches</th><th class=\"num\">median ms</th><th class=\"num\">speedup</th><th>not verified</th></tr></thead><tbody>\n");
        for c in &cs {
            let m = median(&c.times);
            let _ = writeln!(
                body,
                "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                esc(&c.label),
                c.replays,
                c.times.len(),
                m.map_or("-".into(), |m| format!("{:.3}", m as f64 / 1e6)),
                match (base, m) {
                    (Some(b), Some(m)) => format!("{:.2}x", b as f64 / m.max(1) as f64),
                    _ => "-".into(),
                },
                esc(&c.failed.join(", "))
            );
        }
        body.push_str("</tbody></table>\n");
        summary.charts += 1;
    }
    if !body.is_empty() {
        out.push_str("<section id=\"tuning\">\n<h2>Tuning by launch configuration</h2>\n");
        out.push_str("<p class=\"note\">Kernels replayed with several launch configurations or images (<code>rrstore tune</code>); a configuration whose output did not verify is never the fastest.</p>\n");
        out.push_str(&body);
        out.push_str("</section>\n");
    }
}
