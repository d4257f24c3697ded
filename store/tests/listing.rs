//! The compact `ls` table lists the same recordings in the same order with
//! the same fields as the full summaries, for every sort and filter.

mod common;

use common::*;
use rrstore_format::id::hex;
use rrstore_store::{ImportOptions, LsFilter, LsSort, Store};

#[test]
fn compact_table_matches_the_full_listing() {
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(tmp.path()).unwrap();
    for (i, s) in rrstore_store::find_sources(&[fixtures()])
        .unwrap()
        .iter()
        .enumerate()
    {
        let opts = ImportOptions {
            label: format!("run-{}", i % 3),
            source: String::new(),
            environment: None,
        };
        store.import_source(s, &opts, &mut |_| {}).unwrap();
    }
    let all = store.list(&LsFilter::default()).unwrap();
    assert!(all.len() >= 20);
    store
        .tag(
            &all[0].id.parse().unwrap(),
            &[("k".into(), "v".into())],
            &[],
        )
        .unwrap();
    let filters = [
        LsFilter::default(),
        LsFilter {
            sort: LsSort::Size,
            ..Default::default()
        },
        LsFilter {
            sort: LsSort::Name,
            ..Default::default()
        },
        LsFilter {
            label: Some("run-1".into()),
            sort: LsSort::Name,
            limit: Some(3),
            ..Default::default()
        },
        LsFilter {
            kernel: Some("*main*".into()),
            ..Default::default()
        },
        LsFilter {
            tags: vec![("k".into(), "v".into())],
            ..Default::default()
        },
    ];
    for f in &filters {
        let full = store.list(f).unwrap();
        let t = store.list_table(f).unwrap();
        assert_eq!(t.len(), full.len(), "{f:?}");
        assert_eq!(t.rows().len(), full.len());
        for (r, s) in t.rows().zip(&full) {
            assert_eq!(hex(&r.id), s.id);
            assert_eq!(t.kernel(r), s.kernel.as_bytes());
            assert_eq!(t.target(r), s.target.as_bytes());
            assert_eq!(t.label(r), s.label.as_bytes());
            assert_eq!(r.input_size, s.input_size);
            assert_eq!(r.num_args, s.num_args);
            assert_eq!(r.imported_at, s.imported_at);
        }
        let kw = full.iter().map(|s| s.kernel.len()).max().unwrap_or(0);
        assert_eq!(t.kernel_width, kw);
    }
}
