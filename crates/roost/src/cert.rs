//! `roost cert`: a small cluster CA for people who have none. `init` makes the CA; `issue`
//! signs certificates for nodes, workers and clients with it. Keys are written 0600, and no
//! existing file is overwritten.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use chrono::Datelike;
use clap::{Args, Subcommand};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};

#[derive(Args)]
pub struct CertArgs {
    #[command(subcommand)]
    command: CertCommand,
}

#[derive(Subcommand)]
enum CertCommand {
    /// Make a cluster CA: DIR/ca.pem (give it to every node, worker and client) and
    /// DIR/ca-key.pem (keep it secret; only `roost cert issue` needs it)
    Init {
        #[arg(long, default_value = "roost-certs")]
        dir: PathBuf,
    },
    /// Sign a certificate with the CA in --dir, written beside it
    Issue {
        #[command(subcommand)]
        what: IssueCommand,
    },
}

#[derive(Subcommand)]
enum IssueCommand {
    /// A server node's certificate (server and client use): node-N.pem, node-N-key.pem
    Node {
        /// The node's Raft id (named in the certificate: CN node-N, URI roost://node/N)
        #[arg(long)]
        id: u64,
        /// Names and addresses clients and peers reach the node by (comma-separated DNS
        /// names or IP addresses)
        #[arg(long, value_delimiter = ',', required = true)]
        host: Vec<String>,
        #[arg(long, default_value = "roost-certs")]
        dir: PathBuf,
    },
    /// A worker's client certificate: worker-NAME.pem, worker-NAME-key.pem
    Worker {
        #[arg(long)]
        name: String,
        #[arg(long, default_value = "roost-certs")]
        dir: PathBuf,
    },
    /// A client certificate (CLI, scripts): client-NAME.pem, client-NAME-key.pem
    Client {
        #[arg(long)]
        name: String,
        #[arg(long, default_value = "roost-certs")]
        dir: PathBuf,
    },
}

const CA_FILE: &str = "ca.pem";
const CA_KEY_FILE: &str = "ca-key.pem";
/// The CA's subject. `issue` rebuilds the CA certificate from its key and this name (rcgen signs
/// with an issuer's name and key; reading a certificate back needs its `x509-parser` feature).
const CA_NAME: &str = "Roost cluster CA";
const CA_YEARS: i32 = 10;
const LEAF_YEARS: i32 = 2;

pub fn run(args: CertArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        CertCommand::Init { dir } => init(&dir)?,
        CertCommand::Issue { what } => match what {
            IssueCommand::Node { id, host, dir } => {
                if id == 0 {
                    bail!("--id must be at least 1 (a node id)");
                }
                let host: Vec<String> = host
                    .iter()
                    .map(|h| h.trim().to_string())
                    .filter(|h| !h.is_empty())
                    .collect();
                if host.is_empty() {
                    bail!("--host: name at least one DNS name or IP address of the node");
                }
                let mut params = CertificateParams::new(host.clone()).with_context(|| {
                    format!("--host {}: not DNS names or IP addresses", host.join(","))
                })?;
                // The node id, for the peer check of a later peer listener.
                params.subject_alt_names.push(SanType::URI(
                    format!("roost://node/{id}")
                        .try_into()
                        .context("node id URI")?,
                ));
                params
                    .distinguished_name
                    .push(DnType::CommonName, format!("node-{id}"));
                params.extended_key_usages = vec![
                    ExtendedKeyUsagePurpose::ServerAuth,
                    ExtendedKeyUsagePurpose::ClientAuth,
                ];
                issue(&dir, &format!("node-{id}"), params)?;
            }
            IssueCommand::Worker { name, dir } => {
                issue(
                    &dir,
                    &format!("worker-{}", file_safe(&name)?),
                    client_params("worker", &name)?,
                )?;
            }
            IssueCommand::Client { name, dir } => {
                issue(
                    &dir,
                    &format!("client-{}", file_safe(&name)?),
                    client_params("client", &name)?,
                )?;
            }
        },
    }
    Ok(ExitCode::SUCCESS)
}

fn client_params(kind: &str, name: &str) -> anyhow::Result<CertificateParams> {
    let mut params = CertificateParams::new(Vec::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, format!("{kind}-{name}"));
    params.subject_alt_names.push(SanType::URI(
        format!("roost://{kind}/{name}")
            .try_into()
            .with_context(|| format!("--name {name}: not usable in a certificate"))?,
    ));
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    Ok(params)
}

/// Names become file names: letters, digits, `-`, `_` and `.` only.
fn file_safe(name: &str) -> anyhow::Result<&str> {
    let ok = !name.is_empty()
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !ok {
        bail!("--name {name:?}: use letters, digits, '-', '_' and '.' only");
    }
    Ok(name)
}

fn validity(params: &mut CertificateParams, years: i32) {
    let today = chrono::Utc::now().date_naive();
    // Backdated a day: a node whose clock is a little behind still accepts a fresh certificate.
    let start = today.pred_opt().unwrap_or(today);
    let ymd = |d: chrono::NaiveDate, plus: i32| {
        // Day 28 at most, so the same day `years` later always exists (no 29 February).
        rcgen::date_time_ymd(d.year() + plus, d.month() as u8, d.day().min(28) as u8)
    };
    params.not_before = ymd(start, 0);
    params.not_after = ymd(start, years);
}

fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name.push(DnType::CommonName, CA_NAME);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

fn init(dir: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let key = KeyPair::generate().context("generating the CA key")?;
    let mut params = ca_params();
    validity(&mut params, CA_YEARS);
    let cert = params
        .self_signed(&key)
        .context("signing the CA certificate")?;
    // The key first: a CA certificate without its key could issue nothing.
    let key_path = write_new(dir, CA_KEY_FILE, &key.serialize_pem(), 0o600)?;
    let cert_path = write_new(dir, CA_FILE, &cert.pem(), 0o644)?;
    println!("CA certificate: {}", cert_path.display());
    println!("CA key (keep it secret): {}", key_path.display());
    Ok(())
}

fn issue(dir: &Path, stem: &str, mut params: CertificateParams) -> anyhow::Result<()> {
    let ca_key_path = dir.join(CA_KEY_FILE);
    let ca_pem = std::fs::read_to_string(&ca_key_path).with_context(|| {
        format!(
            "cannot read the CA key {} (make one with `roost cert init --dir {}`)",
            ca_key_path.display(),
            dir.display()
        )
    })?;
    let ca_key = KeyPair::from_pem(&ca_pem)
        .with_context(|| format!("{}: not a PEM private key", ca_key_path.display()))?;
    let mut ca = ca_params();
    validity(&mut ca, CA_YEARS);
    let ca_cert = ca.self_signed(&ca_key).context("loading the CA")?;
    check_ca_matches(dir, &ca_key)?;
    validity(&mut params, LEAF_YEARS);
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.use_authority_key_identifier_extension = true;
    let key = KeyPair::generate().context("generating a key")?;
    let cert = params
        .signed_by(&key, &ca_cert, &ca_key)
        .context("signing the certificate")?;
    let key_path = write_new(dir, &format!("{stem}-key.pem"), &key.serialize_pem(), 0o600)?;
    let cert_path = write_new(dir, &format!("{stem}.pem"), &cert.pem(), 0o644)?;
    println!("certificate: {}", cert_path.display());
    println!("key: {}", key_path.display());
    Ok(())
}

/// Refuses to sign with a key that is not the one of `ca.pem` (certificates it signed would
/// not verify against the CA file everyone trusts).
fn check_ca_matches(dir: &Path, ca_key: &KeyPair) -> anyhow::Result<()> {
    let path = dir.join(CA_FILE);
    let certs = roost_tls::load_certs(&path, "the CA file")?;
    // A certificate holds its key's subject public key info verbatim.
    let spki = ca_key.public_key_der();
    let matches = certs
        .iter()
        .any(|c| c.as_ref().windows(spki.len()).any(|w| w == spki.as_slice()));
    if !matches {
        bail!(
            "{}: not the certificate of {} (was the CA made by `roost cert init`?)",
            path.display(),
            dir.join(CA_KEY_FILE).display()
        );
    }
    Ok(())
}

/// Writes a new file with `mode`, refusing to replace one (a second `init` would orphan every
/// certificate the first CA signed).
fn write_new(dir: &Path, name: &str, contents: &str, mode: u32) -> anyhow::Result<PathBuf> {
    let path = dir.join(name);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&path)
        .with_context(|| format!("cannot create {} (it must not exist yet)", path.display()))?;
    file.write_all(contents.as_bytes())
        .and_then(|()| file.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}
