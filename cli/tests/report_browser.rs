//! `rrstore report` rendered by a real browser: Debian's headless
//! Chromium (`scripts/test.sh` installs it) loads the report from disk with
//! no network, a fresh profile and no sandbox (the tests run as root). The
//! test fails on any console message (the report has no script, so any
//! message is an error: a blocked load, a parse error), checks in the DOM
//! Chromium built that every chart is there with its labels, and decodes
//! the screenshots (light and dark) with the `png` crate: the charts' data
//! colours are drawn, the text is dark on light and light on dark, and
//! the charts' own black text is recoloured in the dark style.

mod regress_common;
mod report_common;
mod store_common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use regress_common::*;
use report_common::history_store;

fn chromium() -> PathBuf {
    if let Some(p) = std::env::var_os("RRSTORE_CHROMIUM") {
        return p.into();
    }
    for dir in std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()) {
        for name in ["chromium", "chromium-browser"] {
            let p = dir.join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!("headless Chromium is needed: install Debian's `chromium` (scripts/test.sh does) or set RRSTORE_CHROMIUM");
}

/// What one Chromium run gave.
struct Rendered {
    stdout: String,
    /// The console messages it logged.
    console: Vec<String>,
}

/// Run headless Chromium on `page` with `extra` flags, in a fresh profile.
fn render(page: &Path, extra: &[&str]) -> Rendered {
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A guard against a hung browser, not a measurement.
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("chromium did not finish rendering {}", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "chromium failed: {stderr}");
    Rendered {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        console: stderr
            .lines()
            .filter(|l| l.contains(":CONSOLE"))
            .map(str::to_string)
            .collect(),
    }
}

/// An RGB screenshot.
struct Shot {
    w: usize,
    h: usize,
    rgb: Vec<[u8; 3]>,
}

impl Shot {
    fn load(p: &Path) -> Shot {
        let mut dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(p).unwrap()));
        dec.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
        let mut r = dec.read_info().unwrap();
        let mut buf = vec![
            0;
            r.output_buffer_size()
                .expect("screenshot size fits in memory")
        ];
        let info = r.next_frame(&mut buf).unwrap();
        let step = match info.color_type {
            png::ColorType::Rgb => 3,
            png::ColorType::Rgba => 4,
            other => panic!("unexpected screenshot colour type {other:?}"),
        };
        let rgb = buf[..info.buffer_size()]
            .chunks_exact(step)
            .map(|p| [p[0], p[1], p[2]])
            .collect();
        Shot {
            w: info.width as usize,
            h: info.height as usize,
            rgb,
        }
    }

    fn at(&self, x: usize, y: usize) -> [u8; 3] {
        self.rgb[y * self.w + x]
    }

    /// Pixels within 10 per channel of `c` (anti-aliased edges excluded).
    fn near(&self, c: u32) -> usize {
        let t = [(c >> 16) as u8, (c >> 8) as u8, c as u8];
        self.count(|p| (0..3).all(|i| p[i].abs_diff(t[i]) <= 10))
    }

    fn count(&self, f: impl Fn(&[u8; 3]) -> bool) -> usize {
        self.rgb.iter().filter(|p| f(p)).count()
    }
}

const SAME_GREEN: u32 = 0x2e9d4f;
const DIFFERS_RED: u32 = 0xd32f2f;
const SERIES_BLUE: u32 = 0x1f77d4;
const SERIES_ORANGE: u32 = 0xe66a00;

#[test]
fn the_report_renders_in_headless_chromium_without_console_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    history_store(&s);
    let page = tmp.path().join("report.html");
    ok(
        &s,
        &["report", "--label", "regress", "-o", page.to_str().unwrap()],
    );

    // The console check itself works: a page with a console error and a
    // script error is caught.
    let bad = tmp.path().join("bad.html");
    std::fs::write(
        &bad,
        "<html><body><script>console.error('boom'); missing_fn();</script></body></html>",
    )
    .unwrap();
    let r = render(&bad, &["--dump-dom"]);
    assert_eq!(r.console.len(), 2, "{:?}", r.console);
    assert!(r.console[0].contains("boom") && r.console[1].contains("missing_fn"));

    // The DOM Chromium built: every chart, with its labels.
    let dom = render(&page, &["--dump-dom"]);
    assert!(dom.console.is_empty(), "console: {:?}", dom.console);
    let d = &dom.stdout;
    assert_eq!(
        d.matches("<svg").count(),
        7,
        "2 kernels, matrix, 2 arenas, 2 store"
    );
    for id in [
        "kernel-0",
        "kernel-1",
        "outputs-matrix",
        "arena-0",
        "arena-1",
        "store-growth",
        "store-ratios",
    ] {
        assert!(d.contains(&format!("id=\"{id}\"")), "no figure {id}");
    }
    for label in [
        "kernel time: main_l13",
        "kernel time: main_l16",
        "kernel time (ms)",
        "build-3",
        "build-5",
        "own image",
        "arg 1 @ +0x2000",
        "4 B at +0x2ffc (arg 1 +0xffc)",
        "store size by label",
        "regress: dedup",
    ] {
        assert!(d.contains(label), "no label `{label}` in the DOM");
    }

    // Light: white page, dark text, the charts' colours drawn.
    let light = tmp.path().join("light.png");
    let shot_arg = format!("--screenshot={}", light.display());
    let r = render(&page, &["--window-size=1000,4200", &shot_arg]);
    assert!(r.console.is_empty(), "console: {:?}", r.console);
    let l = Shot::load(&light);
    assert_eq!((l.w, l.h), (1000, 4200));
    assert_eq!(l.at(4, 4), [255, 255, 255]);
    let light_counts = [
        ("same-output green", l.near(SAME_GREEN)),
        ("differs red", l.near(DIFFERS_RED)),
        ("series blue", l.near(SERIES_BLUE)),
        ("series orange", l.near(SERIES_ORANGE)),
    ];
    eprintln!("light screenshot: {light_counts:?}");
    for (what, n) in light_counts {
        assert!(n > 2000, "{what}: only {n} pixels in the light screenshot");
    }
    let dark_text = l.count(|p| p.iter().all(|&c| c < 70));
    eprintln!("light screenshot: {dark_text} dark text pixels");
    assert!(dark_text > 5000, "only {dark_text} dark text pixels");

    // Dark: dark page, light text, and the SVG text and axes (drawn black)
    // turned to the text colour: almost nothing stays black.
    let dark = tmp.path().join("dark.png");
    let shot_arg = format!("--screenshot={}", dark.display());
    let r = render(
        &page,
        &["--window-size=1000,4200", "--force-dark-mode", &shot_arg],
    );
    assert!(r.console.is_empty(), "console: {:?}", r.console);
    let k = Shot::load(&dark);
    assert!(
        k.at(4, 4).iter().all(|&c| c < 40),
        "background {:?}",
        k.at(4, 4)
    );
    let light_text = k.count(|p| p.iter().all(|&c| c > 190));
    assert!(light_text > 5000, "only {light_text} light text pixels");
    let black = k.count(|p| p.iter().all(|&c| c < 8));
    eprintln!("dark screenshot: {light_text} light text pixels, {black} black");
    assert!(black < 200, "{black} black pixels left in the dark style");
    assert!(k.near(SAME_GREEN) > 2000 && k.near(DIFFERS_RED) > 2000);
}
