//! ServiceAccount tokens: JWTs signed with ES256 by a key each sandbox
//! generates when it starts, carrying the claims kube-apiserver writes
//! (`iss`, `sub`, `aud`, `exp`, `iat`, `nbf`, `jti` and the private
//! `kubernetes.io` claim), and the checks that accept one.
//!
//! A token is accepted only with this sandbox's signature, its issuer, an
//! audience the API accepts, inside its lifetime, and while its
//! ServiceAccount (and any object it is bound to) still exists with the uid
//! it was issued for. It must never accept a token any of these fail, and
//! it never writes state.

use std::collections::HashMap;
use std::sync::Mutex;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair,
    UnparsedPublicKey,
};
use serde::{Deserialize, Serialize};

use super::UserInfo;
use super::attributes::{AUTHENTICATED, SERVICE_ACCOUNT_PREFIX, service_account_groups};
use crate::cluster::Cluster;
use crate::error::{Error, Result};
use crate::object::{is_deleting, meta_str};

/// The issuer every sandbox names, kube-apiserver's usual default.
pub(crate) const ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// The audiences the API accepts (`--api-audiences`, which defaults to the issuer).
pub(crate) const API_AUDIENCES: [&str; 1] = [ISSUER];
/// Clock leeway for `exp`, `nbf` and `iat`: go-jose's default, which
/// kube-apiserver's validator uses.
const LEEWAY_SECONDS: i64 = 60;
/// The store keys of the objects a token can name.
pub(crate) const SERVICE_ACCOUNTS: &str = "/serviceaccounts";

/// How many verified tokens the signature cache holds before it starts over.
const CACHE_LIMIT: usize = 4096;

/// The sandbox's token signing key.
pub(crate) struct Signer {
    key: EcdsaKeyPair,
    rng: SystemRandom,
    /// The JWS `kid`: the base64url SHA-256 of the public key's
    /// SubjectPublicKeyInfo, as kube-apiserver derives it.
    kid: String,
    /// Claims of tokens whose signature verified, by token, so a client
    /// that sends the same token on every request pays for the signature
    /// check once (kube-apiserver caches token authentication too). Time,
    /// audience and the ServiceAccount are still checked on every request.
    verified: Mutex<HashMap<String, Claims>>,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer")
            .field("kid", &self.kid)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    alg: String,
    kid: String,
}

/// The claims of a ServiceAccount token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Claims {
    pub(crate) aud: Vec<String>,
    pub(crate) exp: i64,
    pub(crate) iat: i64,
    pub(crate) iss: String,
    pub(crate) jti: String,
    #[serde(rename = "kubernetes.io")]
    pub(crate) kubernetes: Private,
    pub(crate) nbf: i64,
    pub(crate) sub: String,
}

/// The `kubernetes.io` claim: whose token it is and what it is bound to.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Private {
    pub(crate) namespace: String,
    pub(crate) serviceaccount: Ref,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pod: Option<Ref>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) secret: Option<Ref>,
}

/// An object by name and uid.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Ref {
    pub(crate) name: String,
    pub(crate) uid: String,
}

/// The user name of a ServiceAccount.
pub(crate) fn username(namespace: &str, name: &str) -> String {
    format!("{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}")
}

impl Signer {
    /// A fresh P-256 key.
    pub(crate) fn generate() -> Result<Self> {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| Error::SigningKey)?;
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
            .map_err(|_| Error::SigningKey)?;
        // SubjectPublicKeyInfo of a P-256 key: a fixed prefix, then the point.
        const SPKI_PREFIX: [u8; 26] = [
            0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06,
            0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
        ];
        let mut spki = SPKI_PREFIX.to_vec();
        spki.extend_from_slice(key.public_key().as_ref());
        let kid = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, &spki));
        Ok(Self {
            key,
            rng,
            kid,
            verified: Mutex::new(HashMap::new()),
        })
    }

    /// The signed, compact-serialized JWT of `claims`.
    pub(crate) fn sign(&self, claims: &Claims) -> Result<String> {
        let header = Header {
            alg: "ES256".into(),
            kid: self.kid.clone(),
        };
        let mut token = format!("{}.{}", part(&header), part(claims));
        let signature = self
            .key
            .sign(&self.rng, token.as_bytes())
            .map_err(|_| Error::SigningKey)?;
        token.push('.');
        token.push_str(&URL_SAFE_NO_PAD.encode(signature.as_ref()));
        Ok(token)
    }

    /// The claims of a token this key signed, if they hold at `now` (Unix
    /// seconds). Whether its ServiceAccount still exists is [`authenticate`]'s
    /// question.
    pub(crate) fn verify(&self, token: &str, now: i64) -> Option<Claims> {
        let claims = self.signed_claims(token)?;
        let private = &claims.kubernetes;
        let holds = claims.iss == ISSUER
            && claims
                .aud
                .iter()
                .any(|a| API_AUDIENCES.contains(&a.as_str()))
            && now - LEEWAY_SECONDS <= claims.exp
            && now + LEEWAY_SECONDS >= claims.nbf
            && now + LEEWAY_SECONDS >= claims.iat
            && claims.sub == username(&private.namespace, &private.serviceaccount.name);
        holds.then_some(claims)
    }

    /// The claims of a token whose signature this key made.
    fn signed_claims(&self, token: &str) -> Option<Claims> {
        let cache = || self.verified.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(claims) = cache().get(token) {
            return Some(claims.clone());
        }
        let mut parts = token.split('.');
        let (header, payload, signature) = (parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() {
            return None;
        }
        let decode = |part: &str| URL_SAFE_NO_PAD.decode(part).ok();
        let header: Header = serde_json::from_slice(&decode(header)?).ok()?;
        if header.alg != "ES256" || header.kid != self.kid {
            return None;
        }
        let signed = &token[..token.len() - signature.len() - 1];
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, self.key.public_key().as_ref())
            .verify(signed.as_bytes(), &decode(signature)?)
            .ok()?;
        let claims: Claims = serde_json::from_slice(&decode(payload)?).ok()?;
        let mut cache = cache();
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(token.to_owned(), claims.clone());
        Some(claims)
    }
}

/// The ServiceAccount user of a token, while everything it names exists as
/// it did when the token was issued.
pub(crate) fn authenticate(cluster: &Cluster, token: &str) -> Option<UserInfo> {
    // The signature is checked before the state lock is taken.
    let claims = cluster
        .keys
        .tokens
        .verify(token, jiff::Timestamp::now().as_second())?;
    let state = cluster.lock();
    let private = &claims.kubernetes;
    let namespace = private.namespace.as_str();
    let live = |key: &str, reference: &Ref| {
        state
            .get(key, namespace, &reference.name)
            .is_some_and(|object| meta_str(object, "uid") == reference.uid && !is_deleting(object))
    };
    let bound_alive = private.pod.as_ref().is_none_or(|pod| live("/pods", pod))
        && private
            .secret
            .as_ref()
            .is_none_or(|secret| live("/secrets", secret));
    if !(live(SERVICE_ACCOUNTS, &private.serviceaccount) && bound_alive) {
        return None;
    }
    // The uid and groups go on into RBAC (a binding may name the
    // namespace's ServiceAccounts as a group) and into the reviews.
    let mut groups = service_account_groups(namespace);
    groups.push(AUTHENTICATED.to_owned());
    Some(UserInfo {
        name: claims.sub,
        uid: private.serviceaccount.uid.clone(),
        groups,
    })
}

/// One base64url JSON part of a JWT.
fn part(value: &impl Serialize) -> String {
    // Serializing plain structs of strings and integers cannot fail.
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(value).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(now: i64) -> Claims {
        Claims {
            aud: vec![ISSUER.into()],
            exp: now + 3600,
            iat: now,
            iss: ISSUER.into(),
            jti: "j".into(),
            kubernetes: Private {
                namespace: "team".into(),
                serviceaccount: Ref {
                    name: "bot".into(),
                    uid: "u1".into(),
                },
                ..Private::default()
            },
            nbf: now,
            sub: username("team", "bot"),
        }
    }

    #[test]
    fn a_signed_token_verifies_with_its_claims_intact() {
        let signer = Signer::generate().expect("key");
        let now = 1_700_000_000;
        let token = signer.sign(&claims(now)).expect("signed");
        assert_eq!(signer.verify(&token, now), Some(claims(now)));
        let header = URL_SAFE_NO_PAD
            .decode(token.split('.').next().expect("header"))
            .expect("base64");
        let header: serde_json::Value = serde_json::from_slice(&header).expect("json");
        assert_eq!(header["alg"], "ES256");
    }

    #[test]
    fn lifetime_is_checked_with_go_joses_leeway() {
        let signer = Signer::generate().expect("key");
        let now = 1_700_000_000;
        let token = signer.sign(&claims(now)).expect("signed");
        let exp = now + 3600;
        assert!(signer.verify(&token, exp + LEEWAY_SECONDS).is_some());
        assert!(signer.verify(&token, exp + LEEWAY_SECONDS + 1).is_none());
        assert!(signer.verify(&token, now - LEEWAY_SECONDS).is_some());
        assert!(signer.verify(&token, now - LEEWAY_SECONDS - 1).is_none());
    }

    #[test]
    fn tampering_or_foreign_keys_or_wrong_claims_fail() {
        let signer = Signer::generate().expect("key");
        let now = 1_700_000_000;
        let token = signer.sign(&claims(now)).expect("signed");
        let other = Signer::generate().expect("key");
        assert!(other.verify(&token, now).is_none(), "another sandbox's key");

        // A payload naming someone else, with the original signature.
        let mut forged = claims(now);
        forged.kubernetes.serviceaccount.name = "admin".into();
        forged.sub = username("team", "admin");
        let parts: Vec<&str> = token.split('.').collect();
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&forged).expect("json"));
        let spliced = format!("{}.{payload}.{}", parts[0], parts[2]);
        assert!(signer.verify(&spliced, now).is_none(), "payload swapped");

        for bad in [
            Claims {
                aud: vec!["vault".into()],
                ..claims(now)
            },
            Claims {
                iss: "https://elsewhere".into(),
                ..claims(now)
            },
            Claims {
                sub: username("team", "other"),
                ..claims(now)
            },
        ] {
            let token = signer.sign(&bad).expect("signed");
            assert!(signer.verify(&token, now).is_none(), "{bad:?}");
        }
        for junk in ["", "a.b", "a.b.c", "a.b.c.d", &format!("{token}.")] {
            assert!(signer.verify(junk, now).is_none(), "{junk}");
        }
    }
}
