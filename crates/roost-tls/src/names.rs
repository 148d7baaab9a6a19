//! Who a certificate names: the node id in the `roost://node/N` URI that `roost cert issue node`
//! writes into a node's certificate (crates/roost/src/cert.rs). Read with a small DER walk over
//! the certificate's subject alternative names, on certificates the handshake already verified.

/// The URI prefix of a node's subject alternative name.
pub const NODE_URI_PREFIX: &str = "roost://node/";

/// DER tags used below.
const SEQUENCE: u8 = 0x30;
const OID: u8 = 0x06;
const BOOLEAN: u8 = 0x01;
const OCTET_STRING: u8 = 0x04;
/// `[3] EXPLICIT` of `TBSCertificate`: the extensions.
const EXTENSIONS: u8 = 0xA3;
/// `uniformResourceIdentifier [6] IA5String` of `GeneralName`.
const URI: u8 = 0x86;
/// `id-ce-subjectAltName`, 2.5.29.17.
const SUBJECT_ALT_NAME: &[u8] = &[0x55, 0x1D, 0x11];

/// The URI prefix of a worker's subject alternative name (`roost cert issue worker --name N`).
pub const WORKER_URI_PREFIX: &str = "roost://worker/";

/// The node id a certificate (DER) names, if it names exactly one node.
pub fn node_id(cert_der: &[u8]) -> Option<u64> {
    the_one(cert_der, NODE_URI_PREFIX)?.parse::<u64>().ok()
}

/// The worker a certificate (DER) names, if it names exactly one: with TLS on, only such a
/// certificate opens a worker session (one may serve a pool of workers; each worker's id is
/// bound to its credential).
pub fn worker_name(cert_der: &[u8]) -> Option<String> {
    the_one(cert_der, WORKER_URI_PREFIX).filter(|name| !name.is_empty())
}

/// What follows `prefix` in the one URI of the certificate that starts with it. Two such
/// names in one certificate are ambiguous, so it names none.
fn the_one(cert_der: &[u8], prefix: &str) -> Option<String> {
    let mut names = uris(cert_der)?
        .into_iter()
        .filter_map(|uri| uri.strip_prefix(prefix).map(str::to_string));
    let name = names.next()?;
    names.next().is_none().then_some(name)
}

/// The URIs among a certificate's subject alternative names.
fn uris(cert_der: &[u8]) -> Option<Vec<String>> {
    let (SEQUENCE, cert, _) = tlv(cert_der)? else {
        return None;
    };
    let (SEQUENCE, mut tbs, _) = tlv(cert)? else {
        return None;
    };
    while !tbs.is_empty() {
        let (tag, value, rest) = tlv(tbs)?;
        tbs = rest;
        if tag == EXTENSIONS {
            return san_uris(value);
        }
    }
    Some(Vec::new())
}

fn san_uris(explicit: &[u8]) -> Option<Vec<String>> {
    let (SEQUENCE, mut extensions, _) = tlv(explicit)? else {
        return None;
    };
    while !extensions.is_empty() {
        let (SEQUENCE, extension, rest) = tlv(extensions)? else {
            return None;
        };
        extensions = rest;
        let (OID, oid, mut fields) = tlv(extension)? else {
            return None;
        };
        if oid != SUBJECT_ALT_NAME {
            continue;
        }
        let (mut tag, mut value, rest) = tlv(fields)?;
        if tag == BOOLEAN {
            fields = rest;
            (tag, value, _) = tlv(fields)?;
        }
        if tag != OCTET_STRING {
            return None;
        }
        let (SEQUENCE, mut names, _) = tlv(value)? else {
            return None;
        };
        let mut found = Vec::new();
        while !names.is_empty() {
            let (tag, name, rest) = tlv(names)?;
            names = rest;
            if tag == URI {
                found.push(String::from_utf8(name.to_vec()).ok()?);
            }
        }
        return Some(found);
    }
    Some(Vec::new())
}

/// One DER element: its tag, its contents and what follows it. Only single-byte tags and
/// definite lengths (all DER allows for what is read here).
fn tlv(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    if tag & 0x1F == 0x1F {
        return None;
    }
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let octets = usize::from(first & 0x7F);
        if octets == 0 || octets > 4 {
            return None;
        }
        let mut len = 0usize;
        for _ in 0..octets {
            let (&b, r) = rest.split_first()?;
            len = (len << 8) | usize::from(b);
            rest = r;
        }
        len
    };
    if len > rest.len() {
        return None;
    }
    let (value, after) = rest.split_at(len);
    Some((tag, value, after))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cert_with(uris: &[&str]) -> Vec<u8> {
        let mut params = rcgen::CertificateParams::new(vec!["node.example".to_string()]).unwrap();
        for uri in uris {
            params
                .subject_alt_names
                .push(rcgen::SanType::URI(uri.to_string().try_into().unwrap()));
        }
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn a_node_certificate_names_its_node() {
        assert_eq!(node_id(&cert_with(&["roost://node/3"])), Some(3));
    }

    #[test]
    fn a_worker_certificate_names_its_worker_and_nothing_else_does() {
        assert_eq!(
            worker_name(&cert_with(&["roost://worker/w-1.a"])).as_deref(),
            Some("w-1.a")
        );
        assert_eq!(worker_name(&cert_with(&["roost://node/1"])), None);
        assert_eq!(worker_name(&cert_with(&["roost://client/w1"])), None);
        assert_eq!(worker_name(&cert_with(&["roost://worker/"])), None);
        assert_eq!(
            worker_name(&cert_with(&["roost://worker/a", "roost://worker/b"])),
            None,
            "two workers in one certificate name neither"
        );
    }

    #[test]
    fn worker_and_client_certificates_name_no_node() {
        assert_eq!(node_id(&cert_with(&["roost://worker/w1"])), None);
        assert_eq!(node_id(&cert_with(&["roost://client/ops"])), None);
        assert_eq!(node_id(&cert_with(&[])), None);
        assert_eq!(node_id(&cert_with(&["roost://node/x"])), None);
    }

    #[test]
    fn a_certificate_naming_two_nodes_names_none() {
        assert_eq!(
            node_id(&cert_with(&["roost://node/1", "roost://node/2"])),
            None
        );
    }

    #[test]
    fn garbage_names_no_node() {
        assert_eq!(node_id(&[]), None);
        assert_eq!(node_id(&[0x30, 0x84, 0xFF, 0xFF, 0xFF, 0xFF]), None);
        let mut cut = cert_with(&["roost://node/1"]);
        cut.truncate(cut.len() / 2);
        assert_eq!(node_id(&cut), None);
    }
}
