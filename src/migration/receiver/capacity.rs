//! The count cap on the requests one peer's inbox stores: a new request
//! needs room, made by deleting the oldest finished requests of that inbox;
//! only when the requests in flight alone fill the cap is the new one
//! refused (`InboxFull`). With the TTL of finished requests, this bounds
//! what a peer can make this cluster store: at most the cap, plus the one
//! refused request that says why.
//!
//! It must never delete a request in flight, nor one of another inbox.

use std::time::Duration;

use kube::ResourceExt;

use super::steps::Request;
use crate::crd::WorkloadMigration;
use crate::migration::error::{Error, Result};
use crate::migration::finalizer;
use crate::migration::names::RECEIVER_FINALIZER;
use crate::migration::sanitize::{Objection, reasons};
use crate::migration::status::status_of;

/// How many requests an inbox stores by default.
pub const DEFAULT_MAX_REQUESTS_PER_PEER: usize = 1000;

/// What making room for one new request takes.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Room {
    /// The names of the finished requests to delete, oldest first.
    pub evict: Vec<String>,
    /// How many other requests are in flight.
    pub in_flight: usize,
    /// Whether those alone fill the cap: the new request is refused.
    pub full: bool,
}

/// The room the request with `new_uid` needs among `stored` (the inbox's
/// requests, itself included) under `cap`. Pure.
pub(super) fn plan(stored: &[WorkloadMigration], new_uid: &str, cap: usize) -> Room {
    let cap = cap.max(1);
    let others: Vec<&WorkloadMigration> = stored
        .iter()
        .filter(|r| r.uid().as_deref() != Some(new_uid))
        .filter(|r| r.metadata.deletion_timestamp.is_none())
        .collect();
    let (mut finished, in_flight): (Vec<&WorkloadMigration>, Vec<&WorkloadMigration>) = others
        .iter()
        .copied()
        .partition(|r| status_of(r).phase.is_terminal());
    finished.sort_by_key(|r| {
        let status = status_of(r);
        (
            status.finished_time.map(|t| t.0),
            r.metadata.creation_timestamp.clone().map(|t| t.0),
            r.name_any(),
        )
    });
    let excess = (others.len() + 1).saturating_sub(cap);
    Room {
        evict: finished.iter().take(excess).map(|r| r.name_any()).collect(),
        in_flight: in_flight.len(),
        full: in_flight.len() >= cap,
    }
}

impl Request<'_> {
    /// Makes room in the inbox for `wm`, a new request: deletes the oldest
    /// finished requests over the cap. `Some`: the refusal, when the
    /// requests in flight alone fill it.
    pub(super) async fn make_room(&self, wm: &WorkloadMigration) -> Result<Option<Objection>> {
        let cap = self.ctx.config.max_requests_per_peer;
        let stored = self
            .api
            .list(&Default::default())
            .await
            .map_err(|e| Error::kube("list the inbox for its cap", e))?;
        let room = plan(&stored.items, &wm.uid().unwrap_or_default(), cap);
        for name in &room.evict {
            let Some(old) = stored.items.iter().find(|r| r.name_any() == *name) else {
                continue;
            };
            // Finished: nothing is left to undo, so it goes at once.
            finalizer::expire(&self.api, old, RECEIVER_FINALIZER, Duration::ZERO).await?;
            tracing::info!(
                peer = %self.peer,
                request = %name,
                "deleted a finished request to keep the inbox under its cap"
            );
        }
        if !room.full {
            return Ok(None);
        }
        Ok(Some(Objection::new(
            reasons::INBOX_FULL,
            format!(
                "the inbox of {} holds {} requests in flight, as many as this cluster stores for one peer ({cap}); a new request fits once one of them finishes",
                self.peer, room.in_flight
            ),
        )))
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::json;

    use super::*;
    use crate::crd::MigrationPhase;

    fn stored(name: &str, phase: MigrationPhase, finished_second: i64) -> WorkloadMigration {
        let spec = serde_json::from_value(json!({
            "requestId": name, "sourceCluster": "a", "targetCluster": "b",
            "deadline": "2099-01-01T00:00:00Z", "role": "Target", "workload": {},
        }))
        .unwrap();
        let mut wm = WorkloadMigration::new(name, spec);
        wm.metadata.uid = Some(format!("uid-{name}"));
        let mut status = crate::crd::WorkloadMigrationStatus {
            phase,
            ..Default::default()
        };
        if phase.is_terminal() {
            status.finished_time =
                Some(Time(jiff::Timestamp::from_second(finished_second).unwrap()));
        }
        wm.status = Some(status);
        wm
    }

    use MigrationPhase::{Completed, Pending, Progressing, Ready, Rejected, RolledBack};

    #[test]
    fn under_the_cap_nothing_goes() {
        let inbox = [stored("a", Completed, 1), stored("new", Pending, 0)];
        let room = plan(&inbox, "uid-new", 3);
        assert_eq!(room.evict, Vec::<String>::new());
        assert!(!room.full);
    }

    #[test]
    fn the_oldest_finished_requests_go_first_and_never_one_in_flight() {
        let inbox = [
            stored("flight-1", Progressing, 0),
            stored("late", Rejected, 30),
            stored("early", Completed, 10),
            stored("flight-2", Ready, 0),
            stored("middle", RolledBack, 20),
            stored("new", Pending, 0),
        ];
        // Five others and the new one, under a cap of four: two go.
        let room = plan(&inbox, "uid-new", 4);
        assert_eq!(room.evict, ["early", "middle"]);
        assert_eq!(room.in_flight, 2);
        assert!(!room.full);
    }

    #[test]
    fn only_requests_in_flight_filling_the_cap_refuse_the_new_one() {
        let inbox = [
            stored("flight-1", Progressing, 0),
            stored("flight-2", Pending, 0),
            stored("done", Completed, 5),
            stored("new", Pending, 0),
        ];
        let room = plan(&inbox, "uid-new", 2);
        assert!(room.full, "two in flight fill a cap of two");
        assert_eq!(room.evict, ["done"], "finished ones still go");
        assert!(!plan(&inbox, "uid-new", 3).full);
    }
}
