//! The snapshots every language's examples are compared on: the cases of
//! the Rust examples' unit tests and the edges around them, and generated
//! ones. Plain data: it must never depend on a module or the engine.

use ferry::contract::{Cluster, Label, Resources, Snapshot, Thresholds, Workload};

const GIB: u64 = 1 << 30;

fn cluster(name: &str, core_hour: f64, gib_hour: f64) -> Cluster {
    Cluster {
        name: name.into(),
        region: "region-1".into(),
        labels: Vec::new(),
        ready: true,
        allocatable: Resources {
            cpu_millis: 100_000,
            memory_bytes: 400 * GIB,
        },
        requested: Resources::default(),
        cpu_utilization: Some(0.0),
        memory_utilization: Some(0.0),
        cpu_core_hour_price: Some(core_hour),
        memory_gib_hour_price: Some(gib_hour),
        carbon_intensity: None,
    }
}

fn workload(name: &str, cluster: &str, cpu_millis: u64, memory_gib: u64) -> Workload {
    Workload {
        namespace: "shop".into(),
        name: name.into(),
        kind: "Deployment".into(),
        cluster: cluster.into(),
        replicas: 2,
        requests: Resources {
            cpu_millis,
            memory_bytes: memory_gib * GIB,
        },
        ..Workload::default()
    }
}

fn label(key: &str, value: &str) -> Label {
    Label {
        key: key.into(),
        value: value.into(),
    }
}

/// Permissive thresholds: any saving counts, up to 10 moves, no cooldown.
fn snapshot(clusters: Vec<Cluster>, workloads: Vec<Workload>) -> Snapshot {
    Snapshot {
        timestamp_ms: 1_767_225_600_000,
        clusters,
        workloads,
        thresholds: Thresholds {
            min_hourly_savings: 0.0,
            min_savings_ratio: 0.0,
            max_target_cpu_utilization: 0.8,
            max_target_memory_utilization: 0.8,
            cooldown_seconds: 0,
            max_migrations_per_cycle: 10,
        },
        parameters: "{}".into(),
    }
}

/// The cases of cheapest-cluster's unit tests, then the edges around them.
pub fn cheapest_cases() -> Vec<(String, Snapshot)> {
    let three = || {
        vec![
            cluster("a", 0.05, 0.006),
            cluster("b", 0.03, 0.004),
            cluster("c", 0.02, 0.003),
        ]
    };
    let mut cases = vec![(
        "moves to the cheapest ready cluster",
        snapshot(three(), vec![workload("web", "a", 4000, 8)]),
    )];

    let mut down = cluster("c", 0.01, 0.001);
    down.ready = false;
    let mut unpriced = cluster("d", 0.01, 0.001);
    unpriced.memory_gib_hour_price = None;
    let mut cpu_unpriced = cluster("e", 0.001, 0.0001);
    cpu_unpriced.cpu_core_hour_price = None;
    cases.push((
        "skips unready and unpriced clusters",
        snapshot(
            vec![
                cluster("a", 0.05, 0.006),
                cluster("b", 0.03, 0.004),
                down,
                unpriced,
                cpu_unpriced,
            ],
            vec![workload("web", "a", 4000, 8)],
        ),
    ));

    let near = || {
        snapshot(
            vec![cluster("a", 0.05, 0.006), cluster("b", 0.045, 0.006)],
            vec![workload("web", "a", 1000, 1)],
        )
    };
    let mut ratio = near();
    ratio.thresholds.min_savings_ratio = 0.2;
    let mut hourly = near();
    hourly.thresholds.min_hourly_savings = 1.0;
    let mut exact = near();
    // The saving is exactly 0.005/h: a threshold equal to it still clears.
    exact.thresholds.min_hourly_savings = 0.05 - 0.045;
    cases.extend([
        ("below the savings ratio", ratio),
        ("below the hourly savings", hourly),
        ("at the hourly savings", exact),
        ("both thresholds at zero", near()),
    ]);

    let mut small = cluster("b", 0.01, 0.001);
    small.allocatable = Resources {
        cpu_millis: 10_000,
        memory_bytes: 100 * GIB,
    };
    cases.push((
        "capacity across moves",
        snapshot(
            vec![cluster("a", 0.05, 0.006), small.clone()],
            (1..=3)
                .map(|i| workload(&format!("w{i}"), "a", 4000, 1))
                .collect(),
        ),
    ));

    let mut cooling = workload("w1", "a", 4000, 8);
    cooling.seconds_since_migration = Some(60);
    let mut cooled = workload("w4", "a", 3000, 8);
    cooled.seconds_since_migration = Some(3600);
    let mut capped = snapshot(
        vec![cluster("a", 0.05, 0.006), cluster("b", 0.01, 0.001)],
        vec![
            cooling,
            workload("w2", "a", 1000, 1),
            workload("w3", "a", 2000, 1),
            cooled,
        ],
    );
    capped.thresholds.cooldown_seconds = 3600;
    capped.thresholds.max_migrations_per_cycle = 2;
    let mut none_allowed = capped.clone();
    none_allowed.thresholds.max_migrations_per_cycle = 0;
    cases.extend([
        ("cooldown and cycle cap", capped),
        ("a cycle cap of zero", none_allowed),
    ]);

    // Contract v2: the payback of a known disruption cost, and the round
    // trip rule (two moves within a day keep a workload where it is).
    let mut disruptive = workload("web", "a", 4000, 8);
    disruptive.disruption_cost = Some(0.288);
    let mut bounced = workload("bounced", "a", 4000, 8);
    bounced.moves_last_day = 2;
    bounced.moves_last_week = 2;
    bounced.last_move_ms = Some(1_767_222_000_000);
    let mut moved_once = workload("moved-once", "a", 2000, 4);
    moved_once.moves_last_day = 1;
    moved_once.moves_last_week = 5;
    moved_once.disruption_cost = Some(0.0);
    let mut green = three();
    for (c, grams) in green.iter_mut().zip([420.0, 35.5, 810.0]) {
        c.carbon_intensity = Some(grams);
    }
    cases.extend([
        (
            "the payback of a disruption cost",
            snapshot(three(), vec![disruptive]),
        ),
        (
            "a round trip today, a move yesterday, carbon intensity",
            snapshot(green, vec![bounced, moved_once]),
        ),
    ]);

    cases.extend(edge_cases());
    cases
        .into_iter()
        .map(|(case, s)| (case.to_owned(), s))
        .collect()
}

/// Ties, zeros, missing and odd prices, odd names and huge numbers.
fn edge_cases() -> Vec<(&'static str, Snapshot)> {
    let three = || {
        vec![
            cluster("a", 0.05, 0.006),
            cluster("b", 0.03, 0.004),
            cluster("c", 0.02, 0.003),
        ]
    };
    let mut cases = Vec::new();
    // Ties: equal targets go by cluster order, equal savings by workload
    // order, and the room left decides which of the tied workloads moves.
    let mut room = cluster("c", 0.02, 0.003);
    room.allocatable = Resources {
        cpu_millis: 5_000,
        memory_bytes: 400 * GIB,
    };
    let mut twin = room.clone();
    twin.name = "d".into();
    cases.push((
        "ties between targets and between workloads",
        snapshot(
            vec![cluster("a", 0.05, 0.006), room, twin],
            vec![
                workload("first", "a", 2000, 2),
                workload("second", "a", 2000, 2),
                workload("third", "a", 2000, 2),
            ],
        ),
    ));

    let mut zero = workload("idle", "a", 0, 0);
    zero.replicas = 0;
    let mut zero_replicas = workload("scaled-down", "a", 4000, 8);
    zero_replicas.replicas = 0;
    cases.push((
        "zero requests and zero replicas",
        snapshot(three(), vec![zero, zero_replicas]),
    ));

    let mut free_home = cluster("a", 0.0, 0.0);
    free_home.name = "free".into();
    let mut no_price_home = cluster("nohome", 0.05, 0.006);
    no_price_home.cpu_core_hour_price = None;
    cases.push((
        "a free or unpriced home, an unknown cluster",
        snapshot(
            vec![free_home, no_price_home, cluster("b", 0.01, 0.001)],
            vec![
                workload("on-free", "free", 4000, 8),
                workload("unpriced", "nohome", 4000, 8),
                workload("lost", "nowhere", 4000, 8),
            ],
        ),
    ));

    let mut full = cluster("full", 0.001, 0.0001);
    full.allocatable = Resources::default();
    let mut nan = cluster("nan", f64::NAN, 0.001);
    nan.region = "region-2".into();
    let mut dear_twin = cluster("a", 0.09, 0.009);
    dear_twin.ready = false;
    cases.push((
        "nothing allocatable, a NaN price, a name given twice",
        snapshot(
            vec![
                cluster("a", 0.05, 0.006),
                full,
                nan,
                dear_twin,
                cluster("b", 0.04, 0.005),
            ],
            vec![workload("web", "a", 4000, 8)],
        ),
    ));

    let mut huge = cluster("huge", 0.01, 0.001);
    huge.allocatable = Resources {
        cpu_millis: u64::MAX,
        memory_bytes: u64::MAX,
    };
    huge.requested = Resources {
        cpu_millis: u64::MAX - 5,
        memory_bytes: 1 << 60,
    };
    let mut big = workload("big", "a", (1 << 53) + 1, 0);
    big.requests.memory_bytes = (1 << 62) + 3;
    cases.push((
        "u64 values past 2^53, sums that saturate",
        snapshot(vec![cluster("a", 0.05, 0.006), huge], vec![big]),
    ));

    cases.push((
        "no clusters, no workloads",
        snapshot(Vec::new(), Vec::new()),
    ));
    cases
}

/// The cases of spot-aware's unit tests, and its parameters' edges.
pub fn spot_cases() -> Vec<(String, Snapshot)> {
    let clusters = || {
        let mut spot = cluster("spot", 0.030, 0.004);
        spot.labels = vec![
            label("team", "infra"),
            label("ferry.dev/capacity-type", "spot"),
        ];
        let mut far = cluster("far", 0.010, 0.001);
        far.region = "region-2".into();
        let mut preemptible = cluster("preemptible", 0.031, 0.004);
        preemptible.labels = vec![label("pool", "preemptible")];
        vec![
            cluster("home", 0.050, 0.006),
            spot,
            cluster("steady", 0.034, 0.0045),
            far,
            preemptible,
        ]
    };
    let parameters = [
        (
            "the premium outweighs spot",
            r#"{"allowedRegions": ["region-1"]}"#,
        ),
        (
            "no premiums",
            r#"{"riskPremiums": {}, "allowedRegions": ["region-1"]}"#,
        ),
        ("every region", "{}"),
        ("empty parameters", ""),
        ("blank parameters", "  \n"),
        ("an integer premium", r#"{"riskPremiums": {"spot": 1}}"#),
        (
            "another label and premiums",
            r#"{"riskLabel": "pool", "riskPremiums": {"preemptible": 0.5, "spot": 3}, "allowedRegions": ["region-1", "region-3"]}"#,
        ),
        (
            "no allowed region exists",
            r#"{"allowedRegions": ["region-9"]}"#,
        ),
        ("a negative premium", r#"{"riskPremiums": {"spot": -1}}"#),
        ("an unknown field", r#"{"riskPremium": {"spot": 0.1}}"#),
        (
            "a premium that is text",
            r#"{"riskPremiums": {"spot": "high"}}"#,
        ),
        ("a region that is a number", r#"{"allowedRegions": [1]}"#),
        ("a label that is null", r#"{"riskLabel": null}"#),
        ("not JSON", "{riskPremiums"),
    ];
    parameters
        .iter()
        .map(|(case, text)| {
            let mut s = snapshot(
                clusters(),
                vec![
                    workload("web", "home", 4000, 8),
                    workload("api", "home", 1000, 2),
                    workload("batch", "steady", 8000, 16),
                ],
            );
            s.parameters = (*text).to_owned();
            ((*case).to_owned(), s)
        })
        .collect()
}

/// A small deterministic generator (xorshift64*), so the generated corpus is
/// the same on every run and machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// One of `n` evenly spaced steps between `low` and `high`.
    fn step(&mut self, low: f64, high: f64, n: u64) -> f64 {
        low + (high - low) * self.below(n + 1) as f64 / n as f64
    }
}

/// Snapshots of 2 to 9 clusters and up to 80 workloads with spread prices,
/// room, readiness, regions, capacity labels, carbon intensity, cooldowns,
/// move histories, disruption costs and thresholds: many
/// ties (prices on a coarse grid) and targets that fill up.
pub fn generated_cases(seed: u64, count: usize, parameters: &[&str]) -> Vec<(String, Snapshot)> {
    let mut rng = Rng(seed);
    (0..count)
        .map(|n| {
            let clusters: Vec<Cluster> = (0..2 + rng.below(8))
                .map(|i| {
                    let mut c = cluster(
                        &format!("c{i}"),
                        rng.step(0.01, 0.06, 10),
                        rng.step(0.001, 0.008, 7),
                    );
                    c.region = format!("region-{}", 1 + rng.below(3));
                    c.ready = rng.below(8) != 0;
                    c.allocatable = Resources {
                        cpu_millis: 8_000 * (1 + rng.below(16)),
                        memory_bytes: 32 * GIB * (1 + rng.below(16)),
                    };
                    c.requested = Resources {
                        cpu_millis: c.allocatable.cpu_millis / 10 * rng.below(9),
                        memory_bytes: c.allocatable.memory_bytes / 10 * rng.below(9),
                    };
                    match rng.below(4) {
                        0 => c.labels = vec![label("ferry.dev/capacity-type", "spot")],
                        1 => c.labels = vec![label("ferry.dev/capacity-type", "on-demand")],
                        _ => {}
                    }
                    if rng.below(12) == 0 {
                        c.memory_gib_hour_price = None;
                    }
                    if rng.below(2) == 0 {
                        c.carbon_intensity = Some(rng.step(20.0, 800.0, 39));
                    }
                    c
                })
                .collect();
            let workloads = (0..rng.below(81))
                .map(|i| {
                    let home = &clusters[rng.below(clusters.len() as u64) as usize].name;
                    let mut w = workload(
                        &format!("w{i}"),
                        home,
                        250 * (1 + rng.below(16)),
                        1 + rng.below(32),
                    );
                    w.namespace = format!("team-{}", rng.below(3));
                    w.replicas = rng.below(6) as u32;
                    if rng.below(3) == 0 {
                        w.seconds_since_migration = Some(rng.below(7200));
                    }
                    // Move history: mostly none, sometimes a round trip.
                    w.moves_last_day = [0, 0, 0, 1, 2, 3][rng.below(6) as usize];
                    w.moves_last_week = w.moves_last_day + rng.below(3) as u32;
                    if w.moves_last_week > 0 {
                        w.last_move_ms = Some(1_767_225_600_000 - 1000 * rng.below(86_400));
                    }
                    if rng.below(2) == 0 {
                        w.disruption_cost = Some(rng.step(0.0, 2.0, 8));
                    }
                    w
                })
                .collect();
            let mut s = snapshot(clusters, workloads);
            s.thresholds = Thresholds {
                min_hourly_savings: rng.step(0.0, 0.02, 4),
                min_savings_ratio: rng.step(0.0, 0.3, 3),
                max_target_cpu_utilization: rng.step(0.5, 1.0, 5),
                max_target_memory_utilization: rng.step(0.5, 1.0, 5),
                cooldown_seconds: 1800 * rng.below(3),
                max_migrations_per_cycle: rng.below(25) as u32,
            };
            s.parameters = parameters[rng.below(parameters.len() as u64) as usize].to_owned();
            (format!("generated #{n} (seed {seed})"), s)
        })
        .collect()
}
