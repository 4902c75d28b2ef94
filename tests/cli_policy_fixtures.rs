//! `ferry policy test` and `ferry policy bench`, run as an author runs them
//! on the example modules.

mod support;
use support::modules::module_path as module;

use std::path::Path;
use std::process::{Command, Output};

fn ferry(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(args)
        .env_remove("FERRY_LOG")
        .env_remove("FERRY_OUTPUT")
        .output()
        .expect("ferry runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write(dir: &Path, name: &str, content: &str) {
    let path = dir.join(name);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, content).unwrap();
}

/// Two clusters; `web` costs 0.124 an hour on `dear` and 0.052 on `cheap`.
const SNAPSHOT: &str = r#"{
  "timestampMs": 1767225600000,
  "clusters": [
    {"name": "dear", "region": "eu", "ready": true,
     "allocatable": {"cpuMillis": 64000, "memoryBytes": 274877906944},
     "requested": {"cpuMillis": 0, "memoryBytes": 0},
     "cpuCoreHourPrice": 0.05, "memoryGibHourPrice": 0.006},
    {"name": "cheap", "region": "eu", "ready": true,
     "allocatable": {"cpuMillis": 64000, "memoryBytes": 274877906944},
     "requested": {"cpuMillis": 0, "memoryBytes": 0},
     "cpuCoreHourPrice": 0.02, "memoryGibHourPrice": 0.003}
  ],
  "workloads": [
    {"namespace": "shop", "name": "web", "kind": "Deployment", "cluster": "dear",
     "replicas": 2, "requests": {"cpuMillis": 2000, "memoryBytes": 4294967296}}
  ]
}"#;

/// A fixture expecting `web` to move from `dear` to `to` with `savings`.
fn moves_fixture(to: &str, savings: &str) -> String {
    format!(
        "description: moves web to the cheaper cluster
snapshot: ../snapshots/two.json
expect:
  decisions:
    - namespace: shop
      name: web
      from: dear
      to: {to}
      replicas: 2
      savings: {savings}
"
    )
}

/// A fixtures directory beside a snapshots directory, as authors keep them.
fn fixtures(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "snapshots/two.json", SNAPSHOT);
    for (name, content) in files {
        write(dir.path(), &format!("fixtures/{name}"), content);
    }
    dir
}

fn path(dir: &tempfile::TempDir, name: &str) -> String {
    dir.path().join(name).display().to_string()
}

#[test]
fn passing_fixtures_of_every_kind_exit_0() {
    // No memory price on `cheap` makes it unpriced: no move.
    let unpriced = SNAPSHOT.replace(
        r#""cpuCoreHourPrice": 0.02, "memoryGibHourPrice": 0.003"#,
        r#""cpuCoreHourPrice": 0.02"#,
    );
    let inline = format!("{{\"snapshot\": {unpriced}, \"expect\": {{\"decisions\": []}}}}");
    let dir = fixtures(&[
        ("moves.yaml", &moves_fixture("cheap", "0.072")),
        ("unpriced.json", &inline),
    ]);
    let out = ferry(&[
        "policy",
        "test",
        module("cheapest_cluster").to_str().unwrap(),
        &path(&dir, "fixtures"),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("PASS"), "{stdout}");
    assert!(
        stdout.contains("moves web to the cheaper cluster"),
        "{stdout}"
    );
    assert!(
        stdout.contains("2 fixtures: 2 passed, 0 failed"),
        "{stdout}"
    );
}

#[test]
fn refusals_and_rejections_are_expected_like_decisions() {
    let refuses = "snapshot: ../snapshots/two.json
parameters: {mode: error}
expect:
  refusal: refuses to decide
";
    let rejected = r#"snapshot: ../snapshots/two.json
parameters:
  mode: return
  decisions:
    - {namespace: shop, name: web, fromCluster: dear, toCluster: mars, hourlySavings: 1}
expect:
  decisions: []
  rejected:
    - {namespace: shop, name: web, to: mars, rule: unknownTarget}
"#;
    let dir = fixtures(&[("refuses.yaml", refuses), ("rejected.yml", rejected)]);
    let testbed = module("testbed");
    let out = ferry(&[
        "policy",
        "test",
        testbed.to_str().unwrap(),
        &path(&dir, "fixtures"),
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["passed"], 2, "{report}");

    // The same fixtures fail when the refusal's text or the rule differs.
    let dir = fixtures(&[
        (
            "refuses.yaml",
            &refuses.replace("refuses to decide", "no prices"),
        ),
        (
            "rejected.yml",
            &rejected.replace("unknownTarget", "targetNotReady"),
        ),
    ]);
    let out = ferry(&[
        "policy",
        "test",
        testbed.to_str().unwrap(),
        &path(&dir, "fixtures"),
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(3));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let kinds: Vec<&str> = report["fixtures"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| f["differences"].as_array().unwrap())
        .map(|d| d["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["refused", "missingRejection", "unexpectedRejection"],
        "{report}"
    );
}

/// A contract v2 partial move is matched by the replicas it names, not by
/// the workload's count.
#[test]
fn a_partial_move_is_matched_by_the_replicas_it_names() {
    let partial = |expected: u32| {
        format!(
            r#"snapshot: ../snapshots/two.json
parameters:
  mode: return
  decisions:
    - {{namespace: shop, name: web, fromCluster: dear, toCluster: cheap, hourlySavings: 0.036, replicas: 1}}
expect:
  decisions:
    - {{namespace: shop, name: web, from: dear, to: cheap, replicas: {expected}}}
"#
        )
    };
    let testbed = module("testbed");
    let dir = fixtures(&[("partial.yaml", &partial(1))]);
    let out = ferry(&[
        "policy",
        "test",
        testbed.to_str().unwrap(),
        &path(&dir, "fixtures"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));

    let dir = fixtures(&[("partial.yaml", &partial(2))]);
    let out = ferry(&[
        "policy",
        "test",
        testbed.to_str().unwrap(),
        &path(&dir, "fixtures"),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains("replicas differ"), "{stdout}");
}

#[test]
fn a_failing_fixture_exits_3_with_a_diff_per_decision() {
    let dir = fixtures(&[("moves.yaml", &moves_fixture("mars", "0.5"))]);
    let out = ferry(&[
        "policy",
        "test",
        module("cheapest_cluster").to_str().unwrap(),
        &path(&dir, "fixtures"),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(stdout.contains("FAIL"), "{stdout}");
    assert!(
        stdout.contains("decision shop/web: to, savings differ"),
        "{stdout}"
    );
    assert!(
        stdout.contains("expected  dear -> mars, replicas 2, savings 0.5"),
        "{stdout}"
    );
    assert!(
        stdout.contains("got       dear -> cheap, replicas 2, savings 0.07"),
        "{stdout}"
    );
    assert!(
        stdout.contains("1 fixtures: 0 passed, 1 failed"),
        "{stdout}"
    );

    let out = ferry(&[
        "policy",
        "test",
        module("cheapest_cluster").to_str().unwrap(),
        &path(&dir, "fixtures/moves.yaml"),
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(3));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let difference = &report["fixtures"][0]["differences"][0];
    assert_eq!(difference["kind"], "wrongDecision", "{report}");
    assert_eq!(difference["fields"], serde_json::json!(["to", "savings"]));
    assert_eq!(difference["expected"]["to"], "mars");
    assert_eq!(difference["got"]["to"], "cheap");
    let savings = difference["got"]["savings"].as_f64().unwrap();
    assert!((savings - 0.072).abs() < 1e-12, "{savings}");
}

#[test]
fn an_unexpected_and_a_missing_decision_are_both_named() {
    let expects_none = "snapshot: ../snapshots/two.json\nexpect:\n  decisions: []\n";
    let expects_other = "snapshot: ../snapshots/two.json
expect:
  decisions:
    - {namespace: shop, name: api, from: dear, to: cheap}
    - {namespace: shop, name: web, from: dear, to: cheap}
";
    let dir = fixtures(&[
        ("a-none.yaml", expects_none),
        ("b-other.yaml", expects_other),
    ]);
    let out = ferry(&[
        "policy",
        "test",
        module("cheapest_cluster").to_str().unwrap(),
        &path(&dir, "fixtures"),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    assert!(
        stdout.contains("decision shop/web: made, not expected"),
        "{stdout}"
    );
    assert!(
        stdout.contains("decision shop/api: expected, not made"),
        "{stdout}"
    );
    assert!(
        stdout.contains("2 fixtures: 0 passed, 2 failed"),
        "{stdout}"
    );
}

#[test]
fn a_malformed_fixture_is_named_with_its_line_or_field_and_exits_2() {
    // An unknown key on line 6 of a YAML fixture.
    let yaml = "snapshot: ../snapshots/two.json
expect:
  decisions:
    - namespace: shop
      name: web
      form: dear
      to: cheap
";
    // A mistyped field of a JSON fixture, on its third line.
    let json = "{\"snapshot\": \"../snapshots/two.json\",\n \"expect\": {\"decisions\": [\n  {\"namespace\": \"shop\", \"name\": \"web\", \"from\": \"dear\", \"to\": \"cheap\", \"replicas\": \"two\"}]}}";
    let says_nothing = "snapshot: ../snapshots/two.json\nexpect: {}\n";
    let missing_snapshot = "snapshot: ../snapshots/absent.json\nexpect: {decisions: []}\n";
    let dir = fixtures(&[
        ("typo.yaml", yaml),
        ("typed.json", json),
        ("empty-expect.yaml", says_nothing),
        ("lost.yaml", missing_snapshot),
    ]);
    let out = ferry(&[
        "policy",
        "test",
        module("cheapest_cluster").to_str().unwrap(),
        &path(&dir, "fixtures"),
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        out.stdout.is_empty(),
        "no fixture runs when one is malformed"
    );
    let typo = format!("{}:6:", path(&dir, "fixtures/typo.yaml"));
    assert!(stderr.contains(&typo), "{stderr}");
    assert!(stderr.contains("form"), "{stderr}");
    let typed = format!("{}:3:", path(&dir, "fixtures/typed.json"));
    assert!(stderr.contains(&typed), "{stderr}");
    assert!(stderr.contains("expect.decisions[0].replicas"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}: expect: says nothing",
            path(&dir, "fixtures/empty-expect.yaml")
        )),
        "{stderr}"
    );
    assert!(stderr.contains("absent.json"), "{stderr}");

    let empty = tempfile::tempdir().unwrap();
    let out = ferry(&[
        "policy",
        "test",
        module("cheapest_cluster").to_str().unwrap(),
        empty.path().to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("holds no fixtures"));
}

#[test]
fn bench_times_repeated_evaluations_after_one_compilation() {
    let dir = fixtures(&[]);
    let module_path = module("cheapest_cluster");
    let out = ferry(&[
        "policy",
        "bench",
        module_path.to_str().unwrap(),
        &path(&dir, "snapshots/two.json"),
        "--iterations",
        "7",
        "-o",
        "json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let bytes = std::fs::read(&module_path).unwrap();
    assert_eq!(report["moduleBytes"], bytes.len());
    assert_eq!(report["sha256"], ferry::policy::sha256_hex(&bytes));
    assert_eq!(report["iterations"], 7);
    assert_eq!(report["workloads"], 1);
    assert_eq!(report["decisions"], 1);
    assert!(report["compileMs"].as_f64().unwrap() > 0.0, "{report}");
    assert!(report["memoryBytes"].as_u64().unwrap() > 0, "{report}");
    let times: Vec<f64> = ["minMs", "medianMs", "p90Ms", "maxMs"]
        .iter()
        .map(|key| report[*key].as_f64().unwrap())
        .collect();
    assert!(times[0] > 0.0, "{report}");
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{report}");

    let out = ferry(&[
        "policy",
        "bench",
        module_path.to_str().unwrap(),
        &path(&dir, "snapshots/two.json"),
        "--duration",
        "200ms",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for line in ["compile", "median", "p90", "runs, each instantiate"] {
        assert!(stdout.contains(line), "{line} missing in {stdout}");
    }
}

#[test]
fn bench_exits_3_when_the_module_fails_on_the_snapshot() {
    let dir = fixtures(&[]);
    let out = ferry(&[
        "policy",
        "bench",
        module("testbed").to_str().unwrap(),
        &path(&dir, "snapshots/two.json"),
        "--parameters",
        r#"{"mode": "panic"}"#,
        "--iterations",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stderr).contains("Trap"), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
}
