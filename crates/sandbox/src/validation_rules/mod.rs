//! CRD validation rules (`x-kubernetes-validations`), enforced as
//! kube-apiserver enforces them: compiled when a CRD is written (a rule that
//! does not compile makes the CRD invalid), then evaluated on every write of
//! a custom resource with `self` bound to the value at the rule's schema
//! node, and `oldSelf` to the old value for transition rules on update.
//!
//! - [`compile`]: a CRD version's schema to [`Rules`], and the CRD's own
//!   validation causes (`check_crd`).
//! - `check`: the static checks of one expression (names, plain types).
//! - `eval`: walking an object with its [`Rules`] to the `Invalid` causes.
//! - `library`: the CEL environment (standard and Kubernetes functions).
//! - `value`: JSON to CEL values, typed by the schema.
//! - `wording`: upstream's wording of a CRD's refusal.
//!
//! Pure: no I/O, no locks held across evaluation, and never a panic on an
//! object's or a rule's content; a rule that cannot be evaluated becomes a
//! cause, as upstream reports it.

mod check;
mod compile;
mod eval;
mod library;
mod value;
mod wording;

use std::collections::BTreeMap;

use serde_json::Value;

pub(crate) use compile::check_crd;

/// The compiled rules of one served CRD version, shaped like its schema but
/// holding only the nodes that have rules at or below them. Built once per
/// stored CRD (each write of a CRD has a new resourceVersion and registers
/// its versions anew), never per request.
#[derive(Debug, Default)]
pub(crate) struct Rules {
    root: Option<Node>,
}

/// One schema node with rules at or below it.
#[derive(Debug)]
struct Node {
    /// The node's schema: what `self` is typed by.
    schema: Value,
    /// `type` of the node, as messages quote it (`Invalid value: "string"`).
    type_name: String,
    /// The root of the resource or of an embedded one: `apiVersion`, `kind`
    /// and `metadata.name` are visible to its rules.
    resource_root: bool,
    rules: Vec<Rule>,
    properties: BTreeMap<String, Node>,
    additional: Option<Box<Node>>,
    items: Option<Box<Node>>,
    /// For `x-kubernetes-list-type: map`, the keys that pair a new item with
    /// its old one; items of other lists have no old value.
    map_keys: Option<Vec<String>>,
}

/// One compiled rule with what its failure reports.
#[derive(Debug)]
struct Rule {
    text: String,
    message: String,
    /// `FieldValueInvalid` (the default), `…Forbidden`, `…Required` or
    /// `…Duplicate`.
    reason: String,
    /// The rule's `fieldPath`, normalized to a field path (`a.b[key]`).
    field_path: Option<String>,
    optional_old_self: bool,
    /// A rule that failed to compile is kept with its error, as upstream.
    program: Result<cel::Program, String>,
    message_expression: Option<cel::Program>,
    uses_old_self: bool,
}

impl Rule {
    /// The message when no `messageExpression` supplies one.
    fn message_or_default(&self) -> String {
        if self.message.is_empty() {
            format!("failed rule: {}", self.error_string())
        } else {
            self.message.trim().to_string()
        }
    }

    /// How the rule is named in evaluation errors.
    fn error_string(&self) -> String {
        if self.message.is_empty() {
            self.text.trim().to_string()
        } else {
            self.message.trim().to_string()
        }
    }
}

impl Rules {
    /// Whether any rule is declared at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.root.is_none()
    }
}
