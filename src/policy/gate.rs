//! Admission to the engine's evaluation slots under a process-wide memory
//! budget, shared fairly between owners (the operator's policies).
//!
//! Every evaluation asks for one slot and for the linear memory its limits
//! allow. It runs only when both are free, so the memory all evaluations in
//! flight may hold never exceeds the budget, whatever each policy sets. When
//! several wait, the one whose owner used the least slot time goes first
//! (virtual-time fair queueing): a policy whose evaluations run long waits
//! behind those that ran little, so it cannot starve them. The head of the
//! queue waits for its memory rather than being overtaken, so a large
//! request is delayed, never starved.
//!
//! This part never runs a module and never reads a clock itself: the caller
//! reports how long each grant was held.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::oneshot;

/// Owners remembered for fairness; past this the least recently served
/// are forgotten (they start again level with the rest).
const MAX_OWNERS: usize = 4096;

/// Why an evaluation cannot be admitted at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "its memory limit of {asked} bytes is over the engine's evaluation memory budget of {budget} bytes"
)]
pub struct OverBudget {
    pub asked: u64,
    pub budget: u64,
}

/// The gate: slots, memory, and the queue.
pub(crate) struct Gate {
    state: Mutex<State>,
}

struct State {
    free_slots: u32,
    free_memory: u64,
    budget: u64,
    /// Each owner's virtual time: slot time used, never behind the
    /// queue's floor, so a newcomer cannot bank credit by being idle.
    used: HashMap<String, (Duration, u64)>,
    floor: Duration,
    waiting: Vec<Waiter>,
    seq: u64,
}

struct Waiter {
    owner: String,
    memory: u64,
    seq: u64,
    wake: oneshot::Sender<Grant>,
}

/// What an admitted evaluation holds. [`Grant::release`] gives it back and
/// charges its owner; dropped unreleased (a caller that gave up, even after
/// it was granted), it gives it back uncharged, so nothing ever leaks.
pub(crate) struct Grant {
    gate: Arc<Gate>,
    owner: String,
    memory: u64,
    released: bool,
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grant")
            .field("owner", &self.owner)
            .field("memory", &self.memory)
            .finish()
    }
}

impl Grant {
    /// Returns the slot and memory, charging the owner `held`.
    pub(crate) fn release(mut self, held: Duration) {
        self.released = true;
        self.gate.give_back(&self.owner, self.memory, held);
    }
}

impl Drop for Grant {
    fn drop(&mut self) {
        if !self.released {
            self.gate
                .give_back(&self.owner, self.memory, Duration::ZERO);
        }
    }
}

impl Gate {
    pub(crate) fn new(slots: u32, budget: u64) -> Self {
        Gate {
            state: Mutex::new(State {
                free_slots: slots.max(1),
                free_memory: budget,
                budget,
                used: HashMap::new(),
                floor: Duration::ZERO,
                waiting: Vec::new(),
                seq: 0,
            }),
        }
    }

    pub(crate) fn budget(&self) -> u64 {
        self.lock().budget
    }

    /// Waits for a slot and `memory` bytes of the budget.
    pub(crate) async fn acquire(
        self: &Arc<Self>,
        owner: &str,
        memory: u64,
    ) -> Result<Grant, OverBudget> {
        let woken = {
            let mut state = self.lock();
            if memory > state.budget {
                return Err(OverBudget {
                    asked: memory,
                    budget: state.budget,
                });
            }
            let (wake, woken) = oneshot::channel();
            state.seq += 1;
            let seq = state.seq;
            state.waiting.push(Waiter {
                owner: owner.to_owned(),
                memory,
                seq,
                wake,
            });
            state.dispatch(self);
            woken
        };
        // The gate keeps every waiter until it grants it, so the sender is
        // never dropped unsent while this waits.
        woken.await.map_err(|_| OverBudget {
            asked: memory,
            budget: self.budget(),
        })
    }

    fn give_back(self: &Arc<Self>, owner: &str, memory: u64, held: Duration) {
        let mut state = self.lock();
        state.free_slots += 1;
        state.free_memory += memory;
        state.charge(owner, held);
        state.dispatch(self);
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl State {
    fn virtual_time(&self, owner: &str) -> Duration {
        self.used
            .get(owner)
            .map_or(self.floor, |(used, _)| (*used).max(self.floor))
    }

    fn charge(&mut self, owner: &str, held: Duration) {
        let now = self.virtual_time(owner) + held;
        self.seq += 1;
        let seq = self.seq;
        self.used.insert(owner.to_owned(), (now, seq));
        if self.used.len() > MAX_OWNERS {
            let stalest = self
                .used
                .iter()
                .min_by_key(|(_, (_, served))| *served)
                .map(|(owner, _)| owner.clone());
            if let Some(owner) = stalest {
                self.used.remove(&owner);
            }
        }
    }

    /// Grants to the head of the queue for as long as it fits.
    fn dispatch(&mut self, gate: &Arc<Gate>) {
        // A waiter whose caller gave up (its future dropped) holds nothing.
        self.waiting.retain(|w| !w.wake.is_closed());
        while self.free_slots > 0 {
            let Some(head) = self
                .waiting
                .iter()
                .enumerate()
                .min_by_key(|(_, w)| (self.virtual_time(&w.owner), w.seq))
                .map(|(i, _)| i)
            else {
                break;
            };
            if self.waiting[head].memory > self.free_memory {
                break;
            }
            let waiter = self.waiting.swap_remove(head);
            self.floor = self.floor.max(self.virtual_time(&waiter.owner));
            self.free_slots -= 1;
            self.free_memory -= waiter.memory;
            let grant = Grant {
                gate: gate.clone(),
                owner: waiter.owner,
                memory: waiter.memory,
                released: false,
            };
            // A caller that gave up meanwhile drops the grant unopened, and
            // its Drop gives the slot back; that must not happen under this
            // lock, so it is forgotten here and returned by hand.
            if let Err(mut unsent) = waiter.wake.send(grant) {
                unsent.released = true;
                self.free_slots += 1;
                self.free_memory += unsent.memory;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn gate(slots: u32, budget: u64) -> Arc<Gate> {
        Arc::new(Gate::new(slots, budget))
    }

    /// Polls `future` once: whether it finished, without a runtime's timer.
    fn ready<F: std::future::Future>(future: std::pin::Pin<&mut F>) -> Option<F::Output> {
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        match future.poll(&mut cx) {
            std::task::Poll::Ready(out) => Some(out),
            std::task::Poll::Pending => None,
        }
    }

    #[test]
    fn a_request_over_the_whole_budget_is_refused_at_once() {
        let gate = gate(2, 100 * MIB);
        let mut asked = Box::pin(gate.acquire("big", 200 * MIB));
        assert_eq!(
            ready(asked.as_mut()).unwrap().unwrap_err(),
            OverBudget {
                asked: 200 * MIB,
                budget: 100 * MIB
            }
        );
    }

    #[test]
    fn memory_in_flight_never_exceeds_the_budget() {
        let gate = gate(4, 100 * MIB);
        let mut a = Box::pin(gate.acquire("a", 60 * MIB));
        let a = ready(a.as_mut()).unwrap().unwrap();
        // A slot is free, the memory is not: b waits.
        let mut b = Box::pin(gate.acquire("b", 60 * MIB));
        assert!(ready(b.as_mut()).is_none());
        a.release(Duration::from_millis(1));
        assert!(ready(b.as_mut()).unwrap().is_ok());
    }

    #[test]
    fn the_owner_that_used_least_goes_first() {
        let gate = gate(1, 100 * MIB);
        // `slow` ran a long evaluation before; `quick` a short one.
        let mut first = Box::pin(gate.acquire("slow", MIB));
        let held = ready(first.as_mut()).unwrap().unwrap();
        held.release(Duration::from_secs(30));
        let mut second = Box::pin(gate.acquire("quick", MIB));
        let held = ready(second.as_mut()).unwrap().unwrap();

        // While quick holds the slot, slow queues first and quick second.
        let mut slow = Box::pin(gate.acquire("slow", MIB));
        let mut quick = Box::pin(gate.acquire("quick", MIB));
        assert!(ready(slow.as_mut()).is_none() && ready(quick.as_mut()).is_none());
        held.release(Duration::from_millis(10));
        assert!(ready(slow.as_mut()).is_none(), "slow used more: it waits");
        let held = ready(quick.as_mut()).unwrap().unwrap();
        held.release(Duration::from_millis(10));
        assert!(ready(slow.as_mut()).unwrap().is_ok());
    }

    #[test]
    fn a_newcomer_starts_level_with_the_queue_not_ahead_of_it() {
        let gate = gate(1, 100 * MIB);
        for owner in ["a", "b"] {
            let mut g = Box::pin(gate.acquire(owner, MIB));
            let held = ready(g.as_mut()).unwrap().unwrap();
            held.release(Duration::from_secs(5));
        }
        // a is served again at its virtual time of 5 s: the floor moves up.
        let mut again = Box::pin(gate.acquire("a", MIB));
        let held = ready(again.as_mut()).unwrap().unwrap();
        assert_eq!(gate.lock().virtual_time("new"), Duration::from_secs(5));
        drop(held);
    }

    #[test]
    fn a_grant_dropped_unreleased_gives_everything_back() {
        let gate = gate(1, 10 * MIB);
        let mut a = Box::pin(gate.acquire("a", 10 * MIB));
        let a = ready(a.as_mut()).unwrap().unwrap();
        drop(a);
        let state = gate.lock();
        assert_eq!((state.free_slots, state.free_memory), (1, 10 * MIB));
    }

    #[test]
    fn a_waiter_that_gives_up_holds_nothing() {
        let gate = gate(1, 10 * MIB);
        let mut a = Box::pin(gate.acquire("a", 10 * MIB));
        let a = ready(a.as_mut()).unwrap().unwrap();
        let mut gone = Box::pin(gate.acquire("gone", 10 * MIB));
        assert!(ready(gone.as_mut()).is_none());
        drop(gone);
        a.release(Duration::ZERO);
        let state = gate.lock();
        assert_eq!((state.free_slots, state.free_memory), (1, 10 * MIB));
        assert!(state.waiting.is_empty());
    }
}
