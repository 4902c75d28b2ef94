//! Units as people write them: one grammar per unit, each in one place.
//!
//! | unit | grammar | where |
//! |------|---------|-------|
//! | duration | Go's subset plus `d`, exact to the ns: [`duration::Duration`], [`duration::parse`] | CRD fields, every duration flag of the CLI, a scenario's `thresholds.cooldown` |
//! | lenient duration | the same units, lenient, in ms: `duration::parse_ms_with_days` | every other scenario duration, `--step` |
//! | quantity | Kubernetes quantities, a bare number is the base unit: [`quantity::parse`], [`quantity::whole_bytes`] | pod requests, `ferry policy --memory` |
//! | time | RFC 3339 or bare Unix seconds: [`time::parse`] | `--at`, `--from`, `--to` |
//! | scenario numbers | bare CPU = cores, bare memory = GiB, bare CSV time = seconds, bare `--step` = seconds: [`scenario`] | scenario files, `ferry simulate` |
//!
//! Where two grammars differ, they differ on purpose and say so in their
//! docs; a value one of them accepts is not made to mean something else by
//! the other. Pure: parsing only, never a clock, a file or a cluster.

pub mod duration;
pub mod quantity;
pub mod scenario;
pub mod time;
