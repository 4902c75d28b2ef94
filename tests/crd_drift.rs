//! `crds/*.yaml` must be exactly what `ferry crds --out-dir crds` writes.

use std::collections::BTreeSet;
use std::path::Path;

use ferry::crd::REGENERATE_COMMAND;

#[test]
fn generated_crd_files_match_the_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crds");
    let mut expected_files = BTreeSet::new();
    for crd in ferry::crd::all() {
        let name = ferry::crd::file_name(&crd);
        let expected = ferry::crd::file_content(&crd).unwrap();
        let path = dir.join(&name);
        let actual = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            actual == expected,
            "{} is missing or out of date with src/crd; regenerate it with `{REGENERATE_COMMAND}`",
            path.display()
        );
        expected_files.insert(name);
    }
    let present: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.ends_with(".yaml"))
        .collect();
    let stale: Vec<_> = present.difference(&expected_files).collect();
    assert!(
        stale.is_empty(),
        "crds/ holds files no CRD generates: {stale:?}; delete them and run `{REGENERATE_COMMAND}`"
    );
}

#[test]
fn the_stream_holds_every_crd_in_a_stable_order() {
    let stream = ferry::crd::to_yaml_stream(&ferry::crd::all()).unwrap();
    let names: Vec<&str> = stream
        .lines()
        .filter_map(|line| line.strip_prefix("  name: "))
        .filter(|name| name.ends_with(".ferry.dev"))
        .collect();
    assert_eq!(
        names,
        [
            "clusterpeers.ferry.dev",
            "migrationpolicies.ferry.dev",
            "workloadmigrations.ferry.dev"
        ]
    );
    assert_eq!(stream.matches("\n---\n").count(), 2);
    let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&stream).unwrap();
    assert_eq!(documents.len(), 3);
}

/// `docs/crd-reference.md` is generated from the same schemas, so it always
/// says what the API server enforces.
#[test]
fn the_crd_reference_page_matches_the_schemas() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/crd-reference.md");
    let actual = std::fs::read_to_string(&path).unwrap_or_default();
    let expected = ferry::crd::reference_markdown(&ferry::crd::all());
    assert!(
        actual == expected,
        "{} is missing or out of date with src/crd; regenerate it with `{}`",
        path.display(),
        ferry::crd::REFERENCE_COMMAND
    );
}
