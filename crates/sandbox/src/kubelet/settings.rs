//! The realistic mode's rules: per image pattern, how long a pod takes to
//! start, whether it becomes ready, whether its image pulls, and whether a
//! Job's container exits successfully. Pure; parsed from YAML or JSON.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::error::{Error, Result};

/// The longest start delay a rule may ask for.
const MAX_START_DELAY: Duration = Duration::from_secs(24 * 3600);

/// The rules of the realistic kubelet, matched in order against each
/// container's image; the first match decides. An image no rule matches
/// starts after the kubelet's delay, becomes ready, pulls and exits 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeletRules {
    /// The rules, first match wins.
    pub rules: Vec<ImageRule>,
}

/// What happens to containers whose image matches `image`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRule {
    /// A glob over the whole image reference: `*` matches any run of
    /// characters (`/` and `:` included), `?` one character.
    pub image: String,
    /// Time from the pod's creation to its containers running (or failing
    /// to pull); `None` takes the kubelet's delay.
    pub start_delay: Option<Duration>,
    /// Whether a running container becomes ready.
    pub readiness: Readiness,
    /// Whether the image can be pulled.
    pub pull: Pull,
    /// How a Job's container ends.
    pub exit: Exit,
}

impl ImageRule {
    /// A rule for `image` that changes nothing until its fields are set.
    pub fn new(image: impl Into<String>) -> Self {
        Self {
            image: image.into(),
            start_delay: None,
            readiness: Readiness::Ready,
            pull: Pull::Ok,
            exit: Exit::Success,
        }
    }
}

/// Whether a running container passes its readiness probe.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Readiness {
    /// Ready once running.
    #[default]
    Ready,
    /// Ready and unready in turn, each for the start delay (at least 100 ms).
    Flaky,
    /// Running, never ready.
    Never,
}

/// Whether the image pull succeeds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pull {
    /// The image pulls.
    #[default]
    Ok,
    /// `ErrImagePull`, then `ImagePullBackOff`, in turn, for good.
    Fail,
}

/// How a Job's container ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Exit {
    /// Exit code 0: the Job completes.
    #[default]
    Success,
    /// A non-zero exit: the Job fails.
    Fail,
}

/// The file's shape (YAML or JSON).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    rules: Vec<RuleFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct RuleFile {
    image: String,
    #[serde(default)]
    start_delay: Option<String>,
    #[serde(default)]
    readiness: Readiness,
    #[serde(default)]
    pull: Pull,
    #[serde(default)]
    exit: Exit,
}

impl KubeletRules {
    /// Rules from YAML or JSON text:
    ///
    /// ```yaml
    /// rules:
    ///   - image: "registry.example/slow:*"
    ///     startDelay: 2s          # ms, s or m; default: the kubelet's delay
    ///     readiness: never        # ready | flaky | never
    ///   - image: "*:broken"
    ///     pull: fail              # ok | fail
    ///   - image: "*/migrate-*"
    ///     exit: fail              # success | fail (Jobs)
    /// ```
    pub fn parse(text: &str) -> Result<Self> {
        let invalid = |message: String| Error::KubeletRules { message };
        let file: File =
            serde_saphyr::from_str(text).map_err(|e| invalid(format!("cannot parse: {e}")))?;
        let mut rules = Vec::with_capacity(file.rules.len());
        for (index, rule) in file.rules.into_iter().enumerate() {
            let at = format!("rules[{index}]");
            if rule.image.trim().is_empty() {
                return Err(invalid(format!("{at}.image: must not be empty")));
            }
            let start_delay = match &rule.start_delay {
                None => None,
                Some(text) => Some(
                    parse_delay(text).map_err(|why| invalid(format!("{at}.startDelay: {why}")))?,
                ),
            };
            rules.push(ImageRule {
                image: rule.image,
                start_delay,
                readiness: rule.readiness,
                pull: rule.pull,
                exit: rule.exit,
            });
        }
        Ok(Self { rules })
    }

    /// Rules from a YAML or JSON file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| Error::KubeletRules {
            message: format!("cannot read {}: {e}", path.display()),
        })?;
        Self::parse(&text).map_err(|error| match error {
            Error::KubeletRules { message } => Error::KubeletRules {
                message: format!("{}: {message}", path.display()),
            },
            other => other,
        })
    }

    /// What happens to a pod with these images: the slowest start, the
    /// worst readiness, and a failed pull or exit if any container has one.
    pub(crate) fn effective<'a>(
        &self,
        images: impl IntoIterator<Item = &'a str>,
        default_delay: Duration,
    ) -> Effective {
        let mut effective = Effective {
            start_delay: Duration::ZERO,
            readiness: Readiness::Ready,
            pull: Pull::Ok,
            exit: Exit::Success,
        };
        let mut any = false;
        for image in images {
            any = true;
            let rule = self.rules.iter().find(|r| glob(&r.image, image));
            let delay = rule.and_then(|r| r.start_delay).unwrap_or(default_delay);
            effective.start_delay = effective.start_delay.max(delay);
            if let Some(rule) = rule {
                effective.readiness = effective.readiness.max(rule.readiness);
                if rule.pull == Pull::Fail {
                    effective.pull = Pull::Fail;
                }
                if rule.exit == Exit::Fail {
                    effective.exit = Exit::Fail;
                }
            }
        }
        if !any {
            effective.start_delay = default_delay;
        }
        effective
    }
}

/// The combined outcome of a pod's containers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Effective {
    pub(crate) start_delay: Duration,
    pub(crate) readiness: Readiness,
    pub(crate) pull: Pull,
    pub(crate) exit: Exit,
}

/// `500ms`, `2s`, `1m`, or `0`.
fn parse_delay(text: &str) -> std::result::Result<Duration, String> {
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .ok_or_else(|| format!("{text:?} needs a unit: ms, s or m"))?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a whole number with a unit (ms, s or m)"))?;
    let delay = match unit {
        "ms" => Duration::from_millis(number),
        "s" => Duration::from_secs(number),
        "m" => Duration::from_secs(number.saturating_mul(60)),
        other => return Err(format!("unit {other:?} is not one of ms, s, m")),
    };
    if delay > MAX_START_DELAY {
        return Err(format!("{text:?} is longer than 24h"));
    }
    Ok(delay)
}

/// Whether `text` matches the glob `pattern` (`*` any run, `?` one char).
pub(crate) fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut pi, mut ti) = (0, 0);
    // Where the last `*` was, and the text position it has consumed up to.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == '?' || c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match star {
                Some((sp, st)) => {
                    pi = sp + 1;
                    ti = st + 1;
                    star = Some((sp, st + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_image_references() {
        assert!(glob("*", "nginx:1.27"));
        assert!(glob("*:broken", "registry.example/app:broken"));
        assert!(!glob("*:broken", "registry.example/app:broken-not"));
        assert!(glob("registry.example/*", "registry.example/team/app:1"));
        assert!(glob("app:?", "app:1"));
        assert!(!glob("app:?", "app:12"));
        assert!(glob("a*b*c", "axxbyyc"));
        assert!(!glob("a*b*c", "axxbyy"));
        assert!(!glob("", "x"));
    }

    #[test]
    fn rules_parse_and_the_first_match_decides() {
        let rules = KubeletRules::parse(
            "rules:\n- image: '*:slow'\n  startDelay: 1500ms\n  readiness: never\n- image: '*'\n  pull: fail\n",
        )
        .expect("parses");
        let delay = Duration::from_millis(7);
        let slow = rules.effective(["app:slow"], delay);
        assert_eq!(slow.start_delay, Duration::from_millis(1500));
        assert_eq!((slow.readiness, slow.pull), (Readiness::Never, Pull::Ok));
        let other = rules.effective(["app:1"], delay);
        assert_eq!((other.start_delay, other.pull), (delay, Pull::Fail));
        let both = rules.effective(["app:slow", "app:1"], delay);
        assert_eq!(
            (both.readiness, both.pull),
            (Readiness::Never, Pull::Fail),
            "the worst container decides"
        );
    }

    #[test]
    fn bad_rules_are_refused_naming_the_field() {
        for (text, expected) in [
            ("rules:\n- image: ''\n", "rules[0].image"),
            (
                "rules:\n- image: a\n  startDelay: 5\n",
                "rules[0].startDelay",
            ),
            ("rules:\n- image: a\n  startDelay: 5h\n", "unit \"h\""),
            (
                "rules:\n- image: a\n  startDelay: 9999m\n",
                "longer than 24h",
            ),
            ("rules:\n- image: a\n  readiness: sometimes\n", "sometimes"),
            ("rules:\n- image: a\n  pulll: fail\n", "pulll"),
            ("rulez: []\n", "rulez"),
        ] {
            let error = KubeletRules::parse(text).expect_err(text).to_string();
            assert!(error.contains(expected), "{text}: {error}");
        }
    }
}
