//! What the demo prints, and in which order. The clusters' own records
//! (the policies' decisions, the migrations' phase timestamps) each carry
//! the time they happened, to the second as Kubernetes stores it;
//! [`Timeline`] holds them until nothing earlier can still turn up, then
//! prints them by that second and, within a second, in the order a move
//! goes through (decision, acceptance, progress, readiness, end), so a
//! move's PROGRESSING never comes before the DECIDED that started it.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use jiff::Timestamp;

/// Prints (when echoing) and keeps every line.
pub struct Narrator {
    color: bool,
    echo: bool,
    lines: Vec<String>,
}

impl Narrator {
    pub fn new(color: bool, echo: bool) -> Self {
        Narrator {
            color,
            echo,
            lines: Vec::new(),
        }
    }

    fn emit(&mut self, plain: String, styled: String) {
        if self.echo {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", if self.color { &styled } else { &plain });
            let _ = out.flush();
        }
        self.lines.push(plain);
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    pub fn headline(&mut self, text: &str) {
        let styled = self.paint("1", &format!("== {text}"));
        self.emit(format!("== {text}"), styled);
    }

    pub fn say(&mut self, text: &str) {
        self.emit(format!("   {text}"), format!("   {text}"));
    }

    /// A timed event line, `at` whole seconds into the run; `code` is an
    /// ANSI colour for the tag.
    fn event(&mut self, at: i64, tag: &str, code: &str, text: &str) {
        let plain = format!("[{at:4}s] {tag:<11} {text}");
        let styled = format!(
            "[{at:4}s] {} {text}",
            self.paint(code, &format!("{tag:<11}"))
        );
        self.emit(plain, styled);
    }

    /// Every line printed so far.
    pub fn into_lines(self) -> Vec<String> {
        self.lines
    }
}

/// One thing that happened, not printed yet.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Event {
    pub at: Timestamp,
    /// Where it comes among things of the same second: a price change (0),
    /// a decision (1), a move accepted (2), progressing (3), ready (4),
    /// ended (5), the demo's own notes (6).
    pub step: u8,
    pub tag: &'static str,
    pub code: &'static str,
    pub text: String,
}

/// Events waiting for their turn, ordered by second, step and arrival.
pub(crate) struct Timeline {
    /// When the run's clock started, a whole second: event lines say
    /// seconds since then.
    origin: Timestamp,
    pending: BTreeMap<(i64, u8, u64), Event>,
    arrived: u64,
}

/// How long after an event's time it may still be seen for the first
/// time: the time to write a status and read it back.
const READ_LAG: Duration = Duration::from_secs(1);

impl Timeline {
    /// A timeline counting from `origin`, which must be a whole second.
    pub(crate) fn new(origin: Timestamp) -> Self {
        Timeline {
            origin,
            pending: BTreeMap::new(),
            arrived: 0,
        }
    }

    /// Seconds from the origin to `at`.
    pub(crate) fn offset(&self, at: Timestamp) -> f64 {
        at.duration_since(self.origin).as_secs_f64()
    }

    pub(crate) fn add(&mut self, event: Event) {
        self.arrived += 1;
        self.pending
            .insert((event.at.as_second(), event.step, self.arrived), event);
    }

    /// Prints, in order, every event at or before `barrier` (the time up to
    /// which every decision is known) and at least [`READ_LAG`] old.
    pub(crate) fn release(&mut self, barrier: Timestamp, narrator: &mut Narrator) {
        let lagged = Timestamp::now()
            .checked_sub(jiff::SignedDuration::try_from(READ_LAG).unwrap_or_default())
            .unwrap_or(self.origin);
        self.print_until(barrier.min(lagged), narrator);
    }

    /// Prints everything still pending, in order.
    pub(crate) fn flush(&mut self, narrator: &mut Narrator) {
        self.print_until(Timestamp::MAX, narrator);
    }

    /// Prints the events of every second up to `until`'s (whose own
    /// second may still be filling up, so it waits).
    fn print_until(&mut self, until: Timestamp, narrator: &mut Narrator) {
        let origin = self.origin.as_second();
        while let Some(entry) = self.pending.first_entry() {
            if entry.key().0 >= until.as_second() && until != Timestamp::MAX {
                break;
            }
            let event = entry.remove();
            let at = event.at.as_second() - origin;
            narrator.event(at, event.tag, event.code, &event.text);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(origin: Timestamp, ms: i64, step: u8, tag: &'static str) -> Event {
        Event {
            at: origin + jiff::SignedDuration::from_millis(ms),
            step,
            tag,
            code: "0",
            text: String::new(),
        }
    }

    #[test]
    fn events_print_in_time_order_and_none_beyond_the_barrier() {
        let now = Timestamp::now().as_second();
        let origin = Timestamp::from_second(now - 60).unwrap();
        let mut timeline = Timeline::new(origin);
        let mut narrator = Narrator::new(false, false);
        // In one second, arriving in the wrong order.
        timeline.add(event(origin, 3_000, 3, "PROGRESSING"));
        timeline.add(event(origin, 3_000, 2, "ACCEPTED"));
        timeline.add(event(origin, 3_000, 1, "DECIDED"));
        timeline.add(event(origin, 2_000, 0, "PRICE"));
        timeline.add(event(origin, 9_000, 5, "COMPLETED"));
        timeline.release(origin + jiff::SignedDuration::from_secs(5), &mut narrator);
        assert_eq!(narrator.lines.len(), 4, "{:?}", narrator.lines);
        timeline.flush(&mut narrator);
        let tags: Vec<String> = narrator
            .into_lines()
            .iter()
            .map(|l| {
                let (_, rest) = l.split_once("] ").unwrap_or_default();
                rest.split_whitespace().next().unwrap_or("").to_owned()
            })
            .collect();
        assert_eq!(
            tags,
            ["PRICE", "DECIDED", "ACCEPTED", "PROGRESSING", "COMPLETED"]
        );
    }

    #[test]
    fn a_recent_event_waits_for_the_read_lag() {
        let origin = Timestamp::now();
        let mut timeline = Timeline::new(origin);
        let mut narrator = Narrator::new(false, false);
        timeline.add(event(origin, 0, 1, "DECIDED"));
        timeline.release(Timestamp::MAX, &mut narrator);
        assert!(narrator.lines.is_empty());
    }
}
