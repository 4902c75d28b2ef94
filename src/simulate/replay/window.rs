//! The replayed time window: its start, end and step grid.

use std::time::Duration;

use jiff::Timestamp;

use super::{Error, Result};
use crate::simulate::scenario::MAX_STEPS;

/// The replayed steps: `start`, `start + step`, … each standing for the
/// step of time after it, the last ending at or before the window's end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub(super) start: i64,
    pub(super) step: i64,
    pub(super) steps: usize,
}

impl Window {
    /// The steps from `from` to `to` (whole seconds, after 1970).
    pub fn new(from: Timestamp, to: Timestamp, step: Duration) -> Result<Window> {
        let bad = |m: String| Err(Error::Window(m));
        if step.subsec_nanos() != 0 || step.as_secs() == 0 {
            return bad(format!(
                "the step ({step:?}) is not a whole number of seconds, at least 1"
            ));
        }
        if from.subsec_nanosecond() != 0 || to.subsec_nanosecond() != 0 {
            return bad(format!("{from} and {to} must be whole seconds"));
        }
        if from.as_second() < 0 {
            return bad(format!("{from} is before 1970"));
        }
        if to <= from {
            return bad(format!("the end ({to}) is not after the start ({from})"));
        }
        let step = i64::try_from(step.as_secs()).unwrap_or(i64::MAX);
        let steps = (to.as_second() - from.as_second()) / step;
        if steps == 0 || steps as u64 > MAX_STEPS {
            return bad(format!(
                "{from} to {to} gives {steps} steps of {step}s; must give 1 to {MAX_STEPS}"
            ));
        }
        Ok(Window {
            start: from.as_second(),
            step,
            steps: steps as usize,
        })
    }

    pub fn start(&self) -> Timestamp {
        self.time(0)
    }

    /// The end of the last step.
    pub fn end(&self) -> Timestamp {
        self.time(self.steps)
    }

    pub fn step(&self) -> Duration {
        Duration::from_secs(self.step as u64)
    }

    pub fn steps(&self) -> usize {
        self.steps
    }

    /// The time of step `k` (within the window, so always representable).
    pub(super) fn time(&self, k: usize) -> Timestamp {
        Timestamp::from_second(self.start + k as i64 * self.step).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    /// The step evaluated at `t`, if `t` is one.
    pub(super) fn index(&self, t: Timestamp) -> Option<usize> {
        let offset = t.as_second() - self.start;
        if t.subsec_nanosecond() != 0 || offset < 0 || offset % self.step != 0 {
            return None;
        }
        let k = (offset / self.step) as usize;
        (k < self.steps).then_some(k)
    }
}
