//! What an agent needs to call a cluster whose certificates come from a private CA (`roost cert
//! init`): with the worker's `tls.ca_file` set, each run gets the CA and a bundle of the system's
//! roots plus that CA, under the names the usual clients read (curl, OpenSSL, Python requests,
//! Node). A bundle, not the CA alone, so an agent's calls to public HTTPS sites keep working.

use std::path::{Path, PathBuf};

use crate::config::WorkerConfig;

/// The bundle's file in the work directory, written at the worker's start.
const BUNDLE_FILE: &str = ".roost-ca-bundle.pem";

/// Where Debian, Fedora and Alpine (in that order) keep the system's roots.
const SYSTEM_ROOTS: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

fn bundle_path(config: &WorkerConfig) -> PathBuf {
    config.work_dir.join(BUNDLE_FILE)
}

/// Writes the bundle (the system's roots, if any, then the cluster CA) when the worker has a
/// CA; does nothing otherwise.
pub(crate) fn write_bundle(config: &WorkerConfig) -> Result<(), crate::Error> {
    let Some(ca) = &config.tls.ca_file else {
        return Ok(());
    };
    let cluster = std::fs::read(ca)
        .map_err(|e| crate::Error::Config(format!("tls.ca_file = {}: {e}", ca.display())))?;
    let mut bundle = SYSTEM_ROOTS
        .iter()
        .find_map(|p| std::fs::read(Path::new(p)).ok())
        .unwrap_or_default();
    if !bundle.is_empty() && !bundle.ends_with(b"\n") {
        bundle.push(b'\n');
    }
    bundle.extend_from_slice(&cluster);
    let path = bundle_path(config);
    std::fs::create_dir_all(&config.work_dir)
        .and_then(|()| std::fs::write(&path, bundle))
        .map_err(|e| crate::Error::Config(format!("cannot write {}: {e}", path.display())))
}

/// The variables that point an agent's HTTP clients at the cluster CA, if the worker has one.
pub(crate) fn environment(config: &WorkerConfig) -> Vec<(String, String)> {
    let Some(ca) = &config.tls.ca_file else {
        return Vec::new();
    };
    let ca = ca.display().to_string();
    let bundle = bundle_path(config).display().to_string();
    vec![
        // Roost's CLI, and Node (which adds it to its own roots).
        ("ROOST_CA_FILE".into(), ca.clone()),
        ("NODE_EXTRA_CA_CERTS".into(), ca),
        // Clients that replace their roots with the file: the bundle keeps the system's.
        ("CURL_CA_BUNDLE".into(), bundle.clone()),
        ("SSL_CERT_FILE".into(), bundle.clone()),
        ("REQUESTS_CA_BUNDLE".into(), bundle),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_ca_an_agent_gets_nothing_and_no_file_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let config = WorkerConfig {
            work_dir: dir.path().to_path_buf(),
            ..WorkerConfig::default()
        };
        write_bundle(&config).unwrap();
        assert!(environment(&config).is_empty());
        assert!(!bundle_path(&config).exists());
    }

    #[test]
    fn with_a_ca_the_bundle_ends_with_it_and_the_variables_name_it() {
        let dir = tempfile::tempdir().unwrap();
        let ca = dir.path().join("ca.pem");
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        std::fs::write(&ca, pem).unwrap();
        let mut config = WorkerConfig {
            work_dir: dir.path().to_path_buf(),
            ..WorkerConfig::default()
        };
        config.tls.ca_file = Some(ca.clone());
        write_bundle(&config).unwrap();
        let bundle = std::fs::read_to_string(bundle_path(&config)).unwrap();
        assert!(bundle.ends_with(pem), "{bundle}");
        let env: std::collections::BTreeMap<_, _> = environment(&config).into_iter().collect();
        assert_eq!(env["ROOST_CA_FILE"], ca.display().to_string());
        assert_eq!(env["NODE_EXTRA_CA_CERTS"], ca.display().to_string());
        let bundle = bundle_path(&config).display().to_string();
        assert_eq!(env["CURL_CA_BUNDLE"], bundle);
        assert_eq!(env["SSL_CERT_FILE"], bundle);
    }
}
