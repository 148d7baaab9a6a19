//! TLS for every Roost listener and client: PEM files read with errors that name the file and
//! the setting it came from, and rustls configs built with one crypto provider (ring), passed
//! explicitly to each builder. Nothing here installs a process-wide provider.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

pub use rustls;
pub use tokio_rustls;

mod names;
pub use names::{node_id, worker_name, NODE_URI_PREFIX, WORKER_URI_PREFIX};

/// A PEM file that could not be used, named with the setting that pointed at it.
#[derive(Debug, thiserror::Error)]
#[error("{setting} = {}: {message}", path.display())]
pub struct Error {
    /// The config key, flag or variable that named the file (e.g. `tls.cert_file`).
    pub setting: String,
    pub path: PathBuf,
    pub message: String,
}

impl Error {
    fn new(setting: &str, path: &Path, message: impl Into<String>) -> Self {
        Error {
            setting: setting.to_string(),
            path: path.to_path_buf(),
            message: message.into(),
        }
    }
}

/// The crypto provider of every Roost TLS config.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path, setting: &str) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|e| Error::new(setting, path, format!("cannot read it: {e}")))
}

/// Reads the certificates of a PEM file (at least one).
pub fn load_certs(path: &Path, setting: &str) -> Result<Vec<CertificateDer<'static>>, Error> {
    let bytes = read(path, setting)?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::new(setting, path, format!("not a PEM certificate file: {e}")))?;
    if certs.is_empty() {
        return Err(Error::new(setting, path, "holds no PEM certificate"));
    }
    Ok(certs)
}

/// Reads the private key of a PEM file (PKCS#8, PKCS#1 or SEC1).
pub fn load_key(path: &Path, setting: &str) -> Result<PrivateKeyDer<'static>, Error> {
    let bytes = read(path, setting)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
        Error::new(
            setting,
            path,
            format!("holds no usable PEM private key: {e}"),
        )
    })
}

/// The certificates of a CA file as a trust store.
pub fn load_roots(path: &Path, setting: &str) -> Result<RootCertStore, Error> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(path, setting)? {
        roots
            .add(cert)
            .map_err(|e| Error::new(setting, path, format!("not a usable CA certificate: {e}")))?;
    }
    Ok(roots)
}

/// Checks that a PEM file holds what it should and returns its bytes (for tonic, which takes
/// PEM and would only fail at the first connection).
pub fn read_checked_pem(path: &Path, setting: &str, kind: PemKind) -> Result<Vec<u8>, Error> {
    match kind {
        PemKind::Certificates => load_certs(path, setting).map(drop)?,
        PemKind::PrivateKey => load_key(path, setting).map(drop)?,
    }
    read(path, setting)
}

#[derive(Clone, Copy, Debug)]
pub enum PemKind {
    Certificates,
    PrivateKey,
}

/// A node's (or worker's, or client's) certificate chain and key, with the settings that named
/// them for error messages.
#[derive(Clone, Debug)]
pub struct Identity<'a> {
    pub cert_file: &'a Path,
    pub cert_setting: &'a str,
    pub key_file: &'a Path,
    pub key_setting: &'a str,
}

/// Whether a listener serves clients that present no certificate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientCerts {
    /// Clients and workers, whose requests carry bearer tokens: a certificate is optional, but
    /// one that is presented must be signed by the CA.
    Optional,
    /// Peers: the handshake fails without a certificate the CA signed.
    Required,
}

/// A server config for one listener. With `client_ca`, a client that presents a certificate
/// must present one the CA signed; `client_certs` says whether one that presents none is served.
pub fn server_config(
    identity: &Identity<'_>,
    client_ca: Option<(&Path, &str)>,
    client_certs: ClientCerts,
    alpn: &[&[u8]],
) -> Result<ServerConfig, Error> {
    let certs = load_certs(identity.cert_file, identity.cert_setting)?;
    let key = load_key(identity.key_file, identity.key_setting)?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::new(identity.cert_setting, identity.cert_file, e.to_string()))?;
    let builder = match client_ca {
        Some((path, setting)) => {
            let verifier = WebPkiClientVerifier::builder_with_provider(
                load_roots(path, setting)?.into(),
                provider(),
            );
            let verifier = match client_certs {
                ClientCerts::Optional => verifier.allow_unauthenticated(),
                ClientCerts::Required => verifier,
            }
            .build()
            .map_err(|e| Error::new(setting, path, e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None if client_certs == ClientCerts::Required => {
            return Err(Error::new(
                identity.cert_setting,
                identity.cert_file,
                "a listener that requires client certificates needs the CA that signs them",
            ))
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(certs, key).map_err(|e| {
        Error::new(
            identity.key_setting,
            identity.key_file,
            format!("does not match {}: {e}", identity.cert_file.display()),
        )
    })?;
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(config)
}

/// A client config trusting the CA in `ca` (or, without one, the public web roots of the
/// `webpki-roots` crate), presenting `identity` when given.
pub fn client_config(
    ca: Option<(&Path, &str)>,
    identity: Option<&Identity<'_>>,
) -> Result<ClientConfig, Error> {
    let roots = match ca {
        Some((path, setting)) => load_roots(path, setting)?,
        None => RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
        },
    };
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::new("tls", Path::new(""), e.to_string()))?
        .with_root_certificates(roots);
    match identity {
        Some(id) => {
            let certs = load_certs(id.cert_file, id.cert_setting)?;
            let key = load_key(id.key_file, id.key_setting)?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| Error::new(id.key_setting, id.key_file, e.to_string()))
        }
        None => Ok(builder.with_no_client_auth()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_named_with_its_setting() {
        let err = load_certs(Path::new("/nonexistent/node.pem"), "tls.cert_file")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("tls.cert_file") && err.contains("/nonexistent/node.pem"),
            "{err}"
        );
    }

    #[test]
    fn a_file_without_pem_is_refused() {
        let dir = std::env::temp_dir().join(format!("roost-tls-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("not.pem");
        std::fs::write(&path, "hello").unwrap();
        let certs = load_certs(&path, "tls.ca_file").unwrap_err().to_string();
        let key = load_key(&path, "tls.key_file").unwrap_err().to_string();
        let _ = std::fs::remove_dir_all(&dir);
        assert!(
            certs.contains("tls.ca_file") && certs.contains("no PEM certificate"),
            "{certs}"
        );
        assert!(key.contains("tls.key_file"), "{key}");
    }
}
