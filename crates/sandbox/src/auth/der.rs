//! A small DER reader and writer for the one part of X.509 the sandbox
//! needs to touch itself: a certificate's subject name. It reads the common
//! name and organisations of a client certificate, and re-encodes a subject
//! with one organisation per group (rcgen keeps one value per attribute
//! type, but Kubernetes groups are repeated `O` attributes).
//!
//! It decides nothing about trust: the TLS layer verifies a certificate
//! before its subject is read here. It must never panic on malformed input;
//! anything it does not understand is `None`.

/// One DER element: its tag, its content and its whole encoding.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tlv<'a> {
    pub(crate) tag: u8,
    pub(crate) content: &'a [u8],
    pub(crate) whole: &'a [u8],
}

pub(crate) const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const BIT_STRING: u8 = 0x03;
const UTF8_STRING: u8 = 0x0c;
const PRINTABLE_STRING: u8 = 0x13;
const T61_STRING: u8 = 0x14;
const IA5_STRING: u8 = 0x16;
const BMP_STRING: u8 = 0x1e;
/// `[0] EXPLICIT Version` of a TBSCertificate.
const VERSION: u8 = 0xa0;
/// id-at-commonName, 2.5.4.3.
const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
/// id-at-organizationName, 2.5.4.10.
const ORGANIZATION: &[u8] = &[0x55, 0x04, 0x0a];

/// The first element of `input` and what follows it.
pub(crate) fn read(input: &[u8]) -> Option<(Tlv<'_>, &[u8])> {
    let (&tag, rest) = input.split_first()?;
    // High tag numbers never occur in the structures read here.
    if tag & 0x1f == 0x1f {
        return None;
    }
    let (&first, rest) = rest.split_first()?;
    let (length, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        // 0x80 is BER's indefinite length, which DER forbids.
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let (bytes, rest) = rest.split_at(count);
        let length = bytes
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        (length, rest)
    };
    if rest.len() < length {
        return None;
    }
    let header = input.len() - rest.len();
    let (content, after) = rest.split_at(length);
    let element = Tlv {
        tag,
        content,
        whole: &input[..header + length],
    };
    Some((element, after))
}

/// Every element of a constructed value's content, or `None` if any is malformed.
pub(crate) fn children(mut content: &[u8]) -> Option<Vec<Tlv<'_>>> {
    let mut out = Vec::new();
    while !content.is_empty() {
        let (element, rest) = read(content)?;
        out.push(element);
        content = rest;
    }
    Some(out)
}

/// One element with a definite, minimal length.
pub(crate) fn write(tag: u8, content: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(content.len() + 6);
    out.push(tag);
    let length = content.len();
    if length < 0x80 {
        out.push(length as u8);
    } else {
        let bytes = length.to_be_bytes();
        let skip = bytes.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (bytes.len() - skip) as u8);
        out.extend_from_slice(&bytes[skip..]);
    }
    out.extend_from_slice(content);
    out
}

/// What a certificate's subject says about its holder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Subject {
    pub(crate) common_name: String,
    pub(crate) organizations: Vec<String>,
}

/// The parts of a certificate: TBSCertificate's fields, the signature
/// algorithm, and the index of the subject among the fields.
struct Parts<'a> {
    fields: Vec<Tlv<'a>>,
    algorithm: Tlv<'a>,
    subject: usize,
}

fn parts(certificate: &[u8]) -> Option<Parts<'_>> {
    let (outer, rest) = read(certificate)?;
    if outer.tag != SEQUENCE || !rest.is_empty() {
        return None;
    }
    let [tbs, algorithm, _signature] = children(outer.content)?.try_into().ok()?;
    if tbs.tag != SEQUENCE {
        return None;
    }
    let fields = children(tbs.content)?;
    // version?, serialNumber, signature, issuer, validity, subject, ...
    let subject = if fields.first()?.tag == VERSION { 5 } else { 4 };
    if fields.get(subject)?.tag != SEQUENCE {
        return None;
    }
    Some(Parts {
        fields,
        algorithm,
        subject,
    })
}

/// The subject's common name and organisations, as Go's `pkix.Name` reads
/// them (and so kube-apiserver): every `O` in order, the last `CN`.
pub(crate) fn subject(certificate: &[u8]) -> Option<Subject> {
    let parts = parts(certificate)?;
    let name = parts.fields.get(parts.subject)?;
    let mut subject = Subject::default();
    for rdn in children(name.content)? {
        if rdn.tag != SET {
            return None;
        }
        for attribute in children(rdn.content)? {
            let [oid, value] = children(attribute.content)?.try_into().ok()?;
            if attribute.tag != SEQUENCE || oid.tag != OID {
                return None;
            }
            match oid.content {
                COMMON_NAME => subject.common_name = text(value)?,
                ORGANIZATION => subject.organizations.push(text(value)?),
                _ => {}
            }
        }
    }
    Some(subject)
}

/// A directory string's text.
fn text(value: Tlv<'_>) -> Option<String> {
    match value.tag {
        UTF8_STRING | PRINTABLE_STRING | IA5_STRING => {
            std::str::from_utf8(value.content).ok().map(str::to_owned)
        }
        // Teletex as Latin-1, as Go reads it in practice.
        T61_STRING => Some(value.content.iter().map(|b| char::from(*b)).collect()),
        BMP_STRING => {
            let units: Vec<u16> = value
                .content
                .chunks(2)
                .map(|pair| match pair {
                    [high, low] => Some(u16::from_be_bytes([*high, *low])),
                    _ => None,
                })
                .collect::<Option<_>>()?;
            String::from_utf16(&units).ok()
        }
        _ => None,
    }
}

/// A subject name with one `O` attribute per organisation, then the `CN`,
/// in the order Go's `pkix.Name` writes them.
pub(crate) fn name(common_name: &str, organizations: &[String]) -> Vec<u8> {
    let attribute = |oid: &[u8], value: &str| {
        let mut pair = write(OID, oid);
        pair.extend(write(UTF8_STRING, value.as_bytes()));
        write(SET, &write(SEQUENCE, &pair))
    };
    let mut rdns = Vec::new();
    for organization in organizations {
        rdns.extend(attribute(ORGANIZATION, organization));
    }
    rdns.extend(attribute(COMMON_NAME, common_name));
    write(SEQUENCE, &rdns)
}

/// `certificate` with its subject replaced by `subject` and signed again by
/// `sign` (which must use the key and algorithm of the certificate's issuer).
pub(crate) fn with_subject(
    certificate: &[u8],
    subject: &[u8],
    sign: impl FnOnce(&[u8]) -> Option<Vec<u8>>,
) -> Option<Vec<u8>> {
    let parts = parts(certificate)?;
    let mut fields = Vec::new();
    for (i, field) in parts.fields.iter().enumerate() {
        fields.extend_from_slice(if i == parts.subject {
            subject
        } else {
            field.whole
        });
    }
    let tbs = write(SEQUENCE, &fields);
    let signature = sign(&tbs)?;
    let mut bits = vec![0u8]; // no unused bits
    bits.extend(signature);
    let mut body = tbs;
    body.extend_from_slice(parts.algorithm.whole);
    body.extend(write(BIT_STRING, &bits));
    Some(write(SEQUENCE, &body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair};

    fn certificate(build: impl FnOnce(&mut CertificateParams)) -> Vec<u8> {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        build(&mut params);
        params
            .self_signed(&key)
            .expect("certificate")
            .der()
            .to_vec()
    }

    #[test]
    fn reads_the_common_name_and_organisation_rcgen_writes() {
        let der = certificate(|params| {
            params.distinguished_name = rcgen::DistinguishedName::new();
            params
                .distinguished_name
                .push(DnType::OrganizationName, "system:masters");
            params.distinguished_name.push(DnType::CommonName, "alice");
        });
        assert_eq!(
            subject(&der),
            Some(Subject {
                common_name: "alice".into(),
                organizations: vec!["system:masters".into()],
            })
        );
    }

    #[test]
    fn reads_printable_and_bmp_strings() {
        let der = certificate(|params| {
            params.distinguished_name = rcgen::DistinguishedName::new();
            params.distinguished_name.push(
                DnType::CommonName,
                rcgen::DnValue::PrintableString("bob".try_into().expect("printable")),
            );
            params.distinguished_name.push(
                DnType::OrganizationName,
                rcgen::DnValue::BmpString("Ünïcode".try_into().expect("bmp")),
            );
        });
        let read = subject(&der).expect("parses");
        assert_eq!(read.common_name, "bob");
        assert_eq!(read.organizations, vec!["Ünïcode".to_string()]);
    }

    #[test]
    fn a_spliced_subject_carries_every_group_and_a_valid_signature() {
        let key = KeyPair::generate().expect("key");
        let der = CertificateParams::new(Vec::<String>::new())
            .expect("params")
            .self_signed(&key)
            .expect("certificate")
            .der()
            .to_vec();
        let groups = vec!["a".to_string(), "b".repeat(200), "c".to_string()];
        let spliced = with_subject(&der, &name("carol", &groups), |tbs| {
            rcgen::SigningKey::sign(&key, tbs).ok()
        })
        .expect("spliced");
        assert_eq!(
            subject(&spliced),
            Some(Subject {
                common_name: "carol".into(),
                organizations: groups,
            })
        );
        // The new signature covers the new TBSCertificate under the same key.
        let parts = parts(&spliced).expect("parts");
        let (outer, _) = read(&spliced).expect("outer");
        let [tbs, _, signature] = children(outer.content)
            .expect("children")
            .try_into()
            .expect("three");
        assert_eq!(
            parts.fields.len(),
            children(tbs.content).expect("tbs").len()
        );
        let point = ring::signature::UnparsedPublicKey::new(
            &ring::signature::ECDSA_P256_SHA256_ASN1,
            key.public_key_raw(),
        );
        assert!(point.verify(tbs.whole, &signature.content[1..]).is_ok());
    }

    #[test]
    fn malformed_input_is_none_never_a_panic() {
        let der = certificate(|_| {});
        for cut in 0..der.len() {
            assert_eq!(subject(&der[..cut]), None, "truncated at {cut}");
        }
        assert!(
            read(&[0x30, 0x80, 0x00, 0x00]).is_none(),
            "indefinite length"
        );
        assert!(
            read(&[0x30, 0x85, 1, 1, 1, 1, 1]).is_none(),
            "oversized length"
        );
        assert!(read(&[0x1f, 0x01, 0x00]).is_none(), "high tag number");
        assert!(subject(&[]).is_none());
    }

    #[test]
    fn lengths_are_written_in_their_shortest_form() {
        assert_eq!(write(0x04, &[7; 3])[..2], [0x04, 3]);
        assert_eq!(write(0x04, &[7; 200])[..3], [0x04, 0x81, 200]);
        assert_eq!(write(0x04, &[7; 300])[..4], [0x04, 0x82, 0x01, 0x2c]);
        let long = write(0x04, &[7; 300]);
        let (tlv, rest) = read(&long).expect("reads back");
        assert_eq!((tlv.content.len(), rest.len()), (300, 0));
    }
}
