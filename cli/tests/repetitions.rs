//! `rrstore replay --repetitions N` reports the mean and standard deviation
//! of the kernel time as well as min and median, in the text and the JSON
//! report, computed from the per-launch times the report lists.

mod store_common;

use store_common::*;

#[test]
fn repetitions_report_mean_and_standard_deviation() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("store");
    let saxpy = fixtures().join("llvm22-host/saxpy");
    ok(&s, &["import", saxpy.to_str().unwrap()]);
    let id = ls_ids(&s).remove(0);
    let v: serde_json::Value =
        serde_json::from_str(&ok(&s, &["replay", &id, "--repetitions", "5", "--json"])).unwrap();
    let ns: Vec<f64> = v["timing"]["kernel_ns"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .collect();
    assert_eq!(ns.len(), 5);
    let mean = ns.iter().sum::<f64>() / 5.0;
    let sd = (ns.iter().map(|t| (t - mean).powi(2)).sum::<f64>() / 4.0).sqrt();
    let got_mean = v["kernel_mean_ns"].as_f64().unwrap();
    let got_sd = v["kernel_sd_ns"].as_f64().unwrap();
    assert!(
        (got_mean - mean).abs() <= 1e-6 * mean,
        "{got_mean} vs {mean}"
    );
    assert!(
        (got_sd - sd).abs() <= 1e-6 * sd.max(1.0),
        "{got_sd} vs {sd}"
    );
    let min = ns.iter().cloned().fold(f64::MAX, f64::min);
    assert_eq!(v["kernel_min_ns"].as_f64().unwrap(), min);

    let text = ok(&s, &["replay", &id, "--repetitions", "3"]);
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with("kernel min"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains(" median ") && line.contains(" mean ") && line.contains(" sd "),
        "{line}"
    );
    assert!(line.ends_with("over 3 launches"), "{line}");

    // One launch: the standard deviation is 0.
    let v: serde_json::Value = serde_json::from_str(&ok(&s, &["replay", &id, "--json"])).unwrap();
    assert_eq!(v["kernel_sd_ns"].as_f64(), Some(0.0));
    assert_eq!(v["kernel_mean_ns"].as_f64(), v["kernel_min_ns"].as_f64());
}
