use std::path::Path;
use std::time::Duration;

use super::*;

const T0: i64 = 1_767_225_600;

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap()
}

fn window(steps: i64) -> Window {
    Window::new(at(T0), at(T0 + 60 * steps), Duration::from_secs(60)).unwrap()
}

#[test]
fn times_are_rfc3339_or_unix_seconds() {
    assert_eq!(parse_time("2026-01-01T00:00:00Z").unwrap(), at(T0));
    assert_eq!(parse_time("1767225600").unwrap(), at(T0));
    assert!(parse_time("yesterday").is_err());
}

#[test]
fn steps_are_whole_seconds() {
    assert_eq!(parse_step("5m").unwrap(), Duration::from_secs(300));
    assert_eq!(parse_step("90").unwrap(), Duration::from_secs(90));
    for bad in ["0s", "1500ms", "0", "soon"] {
        assert!(parse_step(bad).is_err(), "{bad}");
    }
}

#[test]
fn a_window_ends_at_or_before_its_end() {
    let w = Window::new(at(T0), at(T0 + 150), Duration::from_secs(60)).unwrap();
    assert_eq!(w.steps(), 2);
    assert_eq!(w.end(), at(T0 + 120));
    assert_eq!(w.index(at(T0 + 60)), Some(1));
    assert_eq!(w.index(at(T0 + 30)), None);
    assert_eq!(w.index(at(T0 + 120)), None, "past the last step");
    for (from, to) in [(T0, T0), (T0, T0 + 59), (T0 + 60, T0)] {
        assert!(
            Window::new(at(from), at(to), Duration::from_secs(60)).is_err(),
            "{from}..{to}"
        );
    }
}

#[test]
fn gaps_carry_the_last_value_and_lead_with_the_first() {
    assert_eq!(
        fill(&[None, Some(2.0), None, Some(3.0), None]),
        Some(vec![2.0, 2.0, 2.0, 3.0, 3.0])
    );
    assert_eq!(fill(&[None, None]), None);
}

#[test]
fn a_template_needs_no_clusters_and_takes_the_replay_step() {
    let text = "thresholds: {minHourlySavings: 0.01, migrationCost: 0.2}\ninterval: 5m\nmigration: {duration: 7m, failureProbability: 0.5}\n";
    let t = Template::parse(text, "t.yaml", Path::new("."), Some(9)).unwrap();
    let s = t.apply(&window(30), Vec::new(), Vec::new()).unwrap();
    assert_eq!((s.steps, s.step_ms, s.interval_steps), (30, 60_000, 5));
    assert_eq!(s.migration.duration_steps, 7);
    assert_eq!(s.migration.cost, 0.2, "migration cost from thresholds");
    assert_eq!(s.migration.failure_probability, 0.5);
    assert_eq!(s.seed, 9);
    assert!((s.thresholds.min_hourly_savings - 0.01).abs() < 1e-12);
    assert!(s.clusters.is_empty());
    let three = Window::new(at(T0), at(T0 + 600), Duration::from_secs(180)).unwrap();
    assert!(matches!(
        t.apply(&three, Vec::new(), Vec::new()),
        Err(Error::Interval { .. })
    ));
}

#[test]
fn a_template_of_comments_is_the_defaults() {
    let t = Template::parse("# nothing to change\n", "t.yaml", Path::new("."), None).unwrap();
    let s = t.apply(&window(10), Vec::new(), Vec::new()).unwrap();
    assert_eq!(s.migration.duration_steps, 10);
}

#[test]
fn a_whole_scenario_is_a_template_whose_clusters_are_ignored() {
    let text = include_str!("../../../tests/data/simulate/price_step.yaml");
    let t = Template::parse(text, "price_step.yaml", Path::new("."), None).unwrap();
    let s = t.apply(&window(120), Vec::new(), Vec::new()).unwrap();
    assert!(s.clusters.is_empty() && s.workloads.is_empty());
    assert_eq!(s.migration.duration_steps, 60, "its 1h in minutes");
    assert_eq!(s.migration.cost, 0.5);
}

#[test]
fn template_errors_keep_their_line() {
    let err = Template::parse(
        "migration:\n  duration: 5m\nthresholds:\n  minSavingsPercent: 400\n",
        "t.yaml",
        Path::new("."),
        None,
    )
    .unwrap_err();
    let Error::Template(err) = err else {
        panic!("{err:?}")
    };
    assert_eq!(err.line(), Some(4), "{err}");
}

#[test]
fn defaults_are_the_crds() {
    let s = Template::defaults(None)
        .apply(&window(10), Vec::new(), Vec::new())
        .unwrap();
    let d = crate::crd::ThresholdsSpec::default();
    assert!((s.thresholds.min_hourly_savings - d.min_hourly_savings).abs() < 1e-12);
    assert_eq!(s.migration.duration_steps, 10, "10 minutes");
    assert_eq!(s.interval_steps, 1);
}

fn points(values: &[Option<f64>]) -> Points {
    values.to_vec()
}

#[test]
fn an_absent_deployment_has_no_pods_unless_the_exporter_was_silent() {
    let w = window(5);
    let mut h = History::default();
    for (tag, v) in [
        (CPU_PRICE, 0.04),
        (MEMORY_PRICE, 0.005),
        (ALLOCATABLE_MEMORY, BYTES_PER_GIB),
    ] {
        h.values.insert(tag.to_owned(), vec![Some(v); 5]);
    }
    // kube-state-metrics silent at step 3.
    h.values.insert(
        ALLOCATABLE_CPU.to_owned(),
        points(&[Some(4.0), Some(4.0), Some(4.0), None, Some(4.0)]),
    );
    let mut web = BTreeMap::new();
    web.insert(
        PODS.to_owned(),
        points(&[None, Some(2.0), Some(3.0), None, None]),
    );
    web.insert(
        CPU_REQUESTS.to_owned(),
        points(&[None, Some(1.0), Some(1.5), None, None]),
    );
    web.insert(
        CPU_USAGE.to_owned(),
        points(&[None, Some(0.4), None, None, None]),
    );
    h.workloads
        .insert(("shop".to_owned(), "web".to_owned()), web);
    let s = build(&w, &Template::defaults(None), vec![("a".to_owned(), h)]).unwrap();
    let web = &s.workloads[0];
    let replicas: Vec<f64> = (0..5).map(|k| web.replicas.at(k)).collect();
    assert_eq!(replicas, [0.0, 2.0, 3.0, 3.0, 0.0]);
    assert_eq!(web.pod_cpu_millis, 500, "the last observed per-pod request");
    assert_eq!(web.pod_memory_bytes, 0, "no memory request");
    let usage = web.usage_cpu_cores.as_ref().unwrap();
    assert!((usage.at(4) - 0.2).abs() < 1e-12, "carried");
    assert!(s.workloads.iter().all(|w| w.cluster == 0));
}

#[test]
fn a_cluster_without_a_price_is_an_error_naming_it() {
    let mut h = History::default();
    h.values
        .insert(ALLOCATABLE_CPU.to_owned(), vec![Some(1.0); 3]);
    h.values
        .insert(ALLOCATABLE_MEMORY.to_owned(), vec![Some(1.0); 3]);
    h.values.insert(CPU_PRICE.to_owned(), vec![Some(0.1); 3]);
    let err = build(
        &window(3),
        &Template::defaults(None),
        vec![("east".to_owned(), h)],
    )
    .unwrap_err();
    assert!(
        matches!(&err, Error::NoData { cluster, value: "memory price", .. } if cluster == "east"),
        "{err}"
    );
}
