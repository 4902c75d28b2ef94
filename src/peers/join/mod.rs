//! `ferry peer join` and `ferry peer rotate` as library calls: what one
//! cluster grants a peer (an inbox namespace, a ServiceAccount bound to the
//! chart's peer role there, a time-bound token, this cluster's public keys)
//! and what the peer stores of it (a kubeconfig Secret and a ClusterPeer).
//!
//! Every step is idempotent: it creates what is missing, updates only the
//! fields join owns, and reports each object as created, updated or
//! unchanged. Re-running join refreshes the token and the keys and changes
//! nothing else. With `dry_run` nothing is written (and no token minted).
//!
//! This part must never widen a peer's rights beyond the chart's peer role
//! bound in the peer's own inbox, never print or log a token, never write a
//! kubeconfig the operator would refuse, and never replace the keys a
//! cluster trusts for a peer with unrelated ones unless told to.

mod accept;
mod error;
mod grant;
mod inbox;
mod names;
mod rotate;
mod write;

pub use accept::{AcceptOptions, accept};
pub use error::{JoinError, Result};
pub use grant::{GRANT_API_VERSION, GRANT_KIND, Grant};
pub use inbox::{GrantRequest, check_installed, grant};
pub use names::{
    Install, LABEL_INBOX_OF, LABEL_PEER, check_label, check_peer_name, inbox_namespace,
};
pub use rotate::{inbox_peers, rotate_keys};

/// What a step did (or, in a dry run, would do) to one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Created,
    Updated,
    Unchanged,
    /// A new token was issued (the object itself is unchanged).
    TokenIssued,
    /// New keys were made; the previous ones are kept.
    Rotated,
}

/// One object a step touched, in which cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub cluster: String,
    pub kind: &'static str,
    pub namespace: Option<String>,
    pub name: String,
    pub action: Action,
    pub dry_run: bool,
    /// Something a person should know, such as a token's expiry.
    pub note: Option<String>,
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let verb = match (self.action, self.dry_run) {
            (Action::Created, false) => "created",
            (Action::Created, true) => "would be created",
            (Action::Updated, false) => "updated",
            (Action::Updated, true) => "would be updated",
            (Action::Unchanged, _) => "unchanged",
            (Action::TokenIssued, false) => "token issued",
            (Action::TokenIssued, true) => "token would be issued",
            (Action::Rotated, false) => "rotated (previous keys kept)",
            (Action::Rotated, true) => "would be rotated (previous keys kept)",
        };
        write!(f, "{}: {} ", self.cluster, self.kind)?;
        if let Some(namespace) = &self.namespace {
            write!(f, "{namespace}/")?;
        }
        write!(f, "{} {verb}", self.name)?;
        if let Some(note) = &self.note {
            write!(f, " ({note})")?;
        }
        Ok(())
    }
}
