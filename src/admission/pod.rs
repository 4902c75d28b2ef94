//! The parts of a pod template every rule walks: its spec, its annotations
//! and all of its containers (`containers`, `initContainers` and
//! `ephemeralContainers`, in that order). Built over a JSON path prefix
//! (`spec.template` for a Deployment) so other workload kinds can reuse the
//! rules. Reads only; never decides.

use serde_json::Value;

use super::json::{Node, object_or_empty};
use super::violation::Violation;

/// The three container lists of a pod spec, in the order rules check them.
pub(crate) const CONTAINER_LISTS: [&str; 3] =
    ["containers", "initContainers", "ephemeralContainers"];

/// A pod template, read once.
pub(crate) struct PodTemplate<'a> {
    /// `<prefix>.spec`.
    pub(crate) spec: Node<'a>,
    /// `<prefix>.metadata.annotations`.
    pub(crate) annotations: Node<'a>,
    /// Every container of every list, each an object.
    pub(crate) containers: Vec<Container<'a>>,
}

/// One container and which list it is in.
pub(crate) struct Container<'a> {
    pub(crate) node: Node<'a>,
    /// `containers`, `initContainers` or `ephemeralContainers`.
    pub(crate) list: &'static str,
}

impl<'a> PodTemplate<'a> {
    /// Reads the template at `prefix` of `root` (e.g. `spec.template` of a
    /// Deployment). The template and its spec must be objects, and so must
    /// every container.
    pub(crate) fn read(root: &'a Value, prefix: &str) -> Result<Self, Violation> {
        let mut template = Node::new(root, "");
        for key in prefix.split('.') {
            template = object_or_empty(&template)?.get(key);
        }
        let template_obj = template
            .object()?
            .ok_or_else(|| missing(&template.path, "a pod template"))?;
        let spec = template_obj.get("spec");
        let metadata = template_obj.get("metadata");
        let annotations = object_or_empty(&metadata)?.get("annotations");
        annotations.object()?;
        let spec_obj = spec
            .object()?
            .ok_or_else(|| missing(&spec.path, "a pod spec"))?;
        let mut containers = Vec::new();
        for list in CONTAINER_LISTS {
            for node in spec_obj.get(list).list()? {
                if node.object()?.is_none() {
                    return Err(missing(&node.path, "a container"));
                }
                containers.push(Container { node, list });
            }
        }
        if !containers.iter().any(|c| c.list == "containers") {
            return Err(missing(
                &spec_obj.get("containers").path,
                "at least one container",
            ));
        }
        Ok(PodTemplate {
            spec,
            annotations,
            containers,
        })
    }
}

fn missing(path: &str, what: &str) -> Violation {
    Violation::new(
        super::violation::reasons::INVALID_MANIFEST,
        path,
        format!("{path} must hold {what}, and it is missing"),
    )
}

/// `<annotations path>[<key>]`: annotation keys hold dots and slashes, so
/// they are written in brackets.
pub(crate) fn annotation_path(annotations: &Node<'_>, key: &str) -> String {
    format!("{}[{key}]", annotations.path)
}
