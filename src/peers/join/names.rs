//! The names join gives what it creates, shared with the chart's `peers`
//! value (deploy/chart/ferry/templates/peer-bindings.yaml) and the
//! migration protocol: a change here is a change of protocol.
//!
//! Pure. Names come from the command line or a grant file, so each is
//! checked to be a DNS-1123 label short enough for the inbox namespace.

use super::error::{JoinError, Result};

/// The label on an inbox namespace naming the peer whose inbox it is.
pub const LABEL_INBOX_OF: &str = "ferry.dev/inbox-of";
/// The label on a kubeconfig Secret naming the peer it reaches.
pub const LABEL_PEER: &str = "ferry.dev/peer";
/// The prefix of inbox namespaces.
const INBOX_PREFIX: &str = "ferry-inbox-";
/// Namespace names are DNS-1123 labels: at most 63 characters.
const MAX_LABEL: usize = 63;

/// Where Ferry is installed in a cluster: its Helm release and namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Install {
    /// The Helm release name (`ferry` by default): prefixes the peer role,
    /// ServiceAccounts and bindings.
    pub release: String,
    /// Ferry's namespace (`ferry-system` by default): its key Secret, the
    /// peers' ServiceAccounts and the kubeconfig Secrets live there.
    pub namespace: String,
}

impl Install {
    /// The ClusterRole the chart ships for peers.
    pub fn peer_role(&self) -> String {
        format!("{}-peer", self.release)
    }

    /// The ServiceAccount (and RoleBinding) of `peer` in this cluster.
    pub fn peer_account(&self, peer: &str) -> String {
        format!("{}-peer-{peer}", self.release)
    }

    /// The Secret holding the kubeconfig this cluster reaches `cluster` with.
    pub fn kubeconfig_secret(&self, cluster: &str) -> String {
        format!("{}-peer-{cluster}", self.release)
    }
}

/// The inbox namespace, in a receiving cluster, of the peer it calls `peer`.
pub fn inbox_namespace(peer: &str) -> String {
    format!("{INBOX_PREFIX}{peer}")
}

/// Checks that `name` can name a peer: a DNS-1123 label that still is one
/// inside `ferry-inbox-<name>`.
pub fn check_peer_name(field: &str, name: &str) -> Result<()> {
    let longest = MAX_LABEL - INBOX_PREFIX.len();
    let well_formed = !name.is_empty()
        && name.len() <= longest
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if well_formed {
        Ok(())
    } else {
        Err(JoinError::invalid(
            field,
            format!(
                "{name:?} is not a cluster name: use 1 to {longest} lower-case letters, digits \
                 and '-', starting and ending with a letter or digit"
            ),
        ))
    }
}

/// Checks that `name` is a DNS-1123 label (a namespace or release name).
pub fn check_label(field: &str, name: &str) -> Result<()> {
    let well_formed = !name.is_empty()
        && name.len() <= MAX_LABEL
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if well_formed {
        Ok(())
    } else {
        Err(JoinError::invalid(
            field,
            format!("{name:?} is not a DNS-1123 label"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_chart() {
        let install = Install {
            release: "ferry".into(),
            namespace: "ferry-system".into(),
        };
        assert_eq!(install.peer_role(), "ferry-peer");
        assert_eq!(install.peer_account("west"), "ferry-peer-west");
        assert_eq!(inbox_namespace("west"), "ferry-inbox-west");
    }

    #[test]
    fn peer_names_fit_in_an_inbox_namespace() {
        assert!(check_peer_name("n", &"a".repeat(51)).is_ok());
        for bad in ["", "A", "a_b", "-a", "a-", "a.b", &"a".repeat(52)] {
            assert!(check_peer_name("n", bad).is_err(), "{bad:?}");
        }
    }
}
