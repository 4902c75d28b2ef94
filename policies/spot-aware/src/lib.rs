//! Like `cheapest-cluster`, but it prices in the risk of interruptible
//! capacity and keeps workloads inside allowed regions.
//!
//! A cluster's ranking price is its plain price times `1 + premium`, where the
//! premium comes from the value of the cluster's `riskLabel`. The savings in a
//! decision are always the plain price difference: the premium changes which
//! move wins, never the money reported.
//!
//! Parameters (JSON, all optional):
//! ```json
//! {"riskLabel": "ferry.dev/capacity-type",
//!  "riskPremiums": {"spot": 0.25},
//!  "allowedRegions": ["eu-west-1", "eu-central-1"]}
//! ```
//! An empty `allowedRegions` allows every region.

use std::collections::BTreeMap;

use ferry_policy_sdk::{
    Cluster, Decision, Pricing, Snapshot, Workload, hourly_cost_at, label, parameters, plan_moves,
};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Parameters {
    pub risk_label: String,
    pub risk_premiums: BTreeMap<String, f64>,
    pub allowed_regions: Vec<String>,
}

impl Default for Parameters {
    fn default() -> Self {
        Parameters {
            risk_label: "ferry.dev/capacity-type".to_owned(),
            risk_premiums: BTreeMap::from([("spot".to_owned(), 0.25)]),
            allowed_regions: Vec::new(),
        }
    }
}

impl Pricing for Parameters {
    fn eligible(&self, _workload: &Workload, cluster: &Cluster) -> bool {
        self.allowed_regions.is_empty()
            || self
                .allowed_regions
                .iter()
                .any(|region| cluster.region == *region)
    }

    fn ranking_cost(&self, workload: &Workload, cluster: &Cluster) -> Option<f64> {
        let premium = label(&cluster.labels, &self.risk_label)
            .and_then(|value| self.risk_premiums.get(value))
            .copied()
            .unwrap_or(0.0);
        hourly_cost_at(workload, cluster).map(|cost| cost * (1.0 + premium))
    }

    fn name(&self) -> &str {
        "spot-aware"
    }
}

pub fn decide(snapshot: &Snapshot) -> Result<Vec<Decision>, String> {
    let params: Parameters = parameters(&snapshot.parameters)?;
    if let Some((kind, premium)) = params
        .risk_premiums
        .iter()
        .find(|(_, p)| !p.is_finite() || **p < 0.0)
    {
        return Err(format!(
            "riskPremiums.{kind} is {premium}: it must be a finite number >= 0"
        ));
    }
    Ok(plan_moves(snapshot, &params))
}

ferry_policy_sdk::policy!(decide);

#[cfg(test)]
mod tests {
    use ferry_policy_sdk::testing::{cluster, label, snapshot, workload};

    use super::decide;

    fn clusters() -> Vec<ferry_policy_sdk::Cluster> {
        let mut spot = cluster("spot", 0.030, 0.004);
        spot.labels = vec![label("ferry.dev/capacity-type", "spot")].into();
        let mut far = cluster("far", 0.010, 0.001);
        far.region = "region-2".into();
        vec![
            cluster("home", 0.050, 0.006),
            spot,
            cluster("steady", 0.034, 0.0045),
            far,
        ]
    }

    #[test]
    fn the_risk_premium_can_outweigh_a_lower_spot_price() {
        let mut s = snapshot(clusters(), vec![workload("web", "home", 4000, 8)]);
        s.parameters = r#"{"allowedRegions": ["region-1"]}"#.into();
        // spot: 0.152/h × 1.25 = 0.19; steady: 0.172/h. Steady wins, savings are plain.
        let decisions = decide(&s).unwrap();
        assert_eq!(decisions[0].to_cluster, "steady");
        assert!((decisions[0].hourly_savings - (0.248 - 0.172)).abs() < 1e-9);
    }

    #[test]
    fn without_premium_spot_wins() {
        let mut s = snapshot(clusters(), vec![workload("web", "home", 4000, 8)]);
        s.parameters = r#"{"riskPremiums": {}, "allowedRegions": ["region-1"]}"#.into();
        assert_eq!(decide(&s).unwrap()[0].to_cluster, "spot");
    }

    #[test]
    fn regions_outside_the_allowed_list_are_never_targets() {
        let mut s = snapshot(clusters(), vec![workload("web", "home", 4000, 8)]);
        s.parameters = r#"{"allowedRegions": ["region-1"]}"#.into();
        assert!(decide(&s).unwrap().iter().all(|d| d.to_cluster != "far"));
        s.parameters = "{}".into();
        assert_eq!(decide(&s).unwrap()[0].to_cluster, "far");
    }

    #[test]
    fn negative_premiums_are_an_error() {
        let mut s = snapshot(clusters(), vec![]);
        s.parameters = r#"{"riskPremiums": {"spot": -1}}"#.into();
        assert!(decide(&s).unwrap_err().contains("riskPremiums.spot"));
    }
}
