//! This worker's device identity towards OpenClaw gateways: an Ed25519 key kept in the work
//! dir (so a gateway that asks to pair devices pairs this worker once), and the signature a
//! `connect` request carries over the gateway's challenge.

use std::path::Path;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ring::rand::SystemRandom;
use ring::signature::{Ed25519KeyPair, KeyPair};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The key's file under the worker's work dir (PKCS#8, owner-only).
const KEY_FILE: &str = "openclaw-device.pk8";

pub(crate) struct Device {
    key: Ed25519KeyPair,
    /// Lowercase hex SHA-256 of the raw public key: the gateway's name for this device.
    id: String,
}

/// Who the worker says it is in `connect`, signed over with the challenge.
pub(crate) struct Hello<'a> {
    pub client_id: &'a str,
    pub client_mode: &'a str,
    pub role: &'a str,
    pub scopes: &'a [&'a str],
    pub token: &'a str,
    pub platform: &'a str,
}

impl Device {
    /// The worker's device, made and saved on first use.
    pub(crate) fn load_or_create(work_dir: &Path) -> Result<Device, String> {
        let path = work_dir.join(KEY_FILE);
        let pkcs8 = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let doc = Ed25519KeyPair::generate_pkcs8(&SystemRandom::new())
                    .map_err(|_| "no randomness for an Ed25519 device key".to_string())?;
                write_private(&path, doc.as_ref())
                    .map_err(|e| format!("cannot save the device key {}: {e}", path.display()))?;
                doc.as_ref().to_vec()
            }
            Err(e) => {
                return Err(format!(
                    "cannot read the device key {}: {e}",
                    path.display()
                ))
            }
        };
        let key = Ed25519KeyPair::from_pkcs8_maybe_unchecked(&pkcs8).map_err(|e| {
            format!(
                "the device key {} is not an Ed25519 PKCS#8 key ({e}); delete it to make a new one",
                path.display()
            )
        })?;
        let id = hex::encode(Sha256::digest(key.public_key().as_ref()));
        Ok(Device { key, id })
    }

    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// `connect.params.device` for the challenge's `nonce` and `ts`: the v3 payload
    /// (`v3|device|client|mode|role|scopes|signedAt|token|nonce|platform|family`) signed.
    pub(crate) fn sign(&self, hello: &Hello<'_>, nonce: &str, signed_at_ms: i64) -> Value {
        let payload = [
            "v3",
            &self.id,
            hello.client_id,
            hello.client_mode,
            hello.role,
            &hello.scopes.join(","),
            &signed_at_ms.to_string(),
            hello.token,
            nonce,
            &hello.platform.to_lowercase(),
            "",
        ]
        .join("|");
        let signature = self.key.sign(payload.as_bytes());
        json!({
            "id": self.id,
            "publicKey": URL_SAFE_NO_PAD.encode(self.key.public_key().as_ref()),
            "signature": URL_SAFE_NO_PAD.encode(signature.as_ref()),
            "signedAt": signed_at_ms,
            "nonce": nonce,
        })
    }
}

fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use ring::signature::{UnparsedPublicKey, ED25519};

    use super::*;

    #[test]
    fn the_key_is_kept_and_the_signature_verifies_over_the_v3_payload() {
        let dir = tempfile::tempdir().expect("tempdir");
        let device = Device::load_or_create(dir.path()).expect("a new key");
        let again = Device::load_or_create(dir.path()).expect("the saved key");
        assert_eq!(device.id(), again.id(), "one device per worker");
        let hello = Hello {
            client_id: "gateway-client",
            client_mode: "backend",
            role: "operator",
            scopes: &["operator.read", "operator.write"],
            token: "tok",
            platform: "Linux",
        };
        let signed = device.sign(&hello, "n1", 42);
        let public = URL_SAFE_NO_PAD
            .decode(signed["publicKey"].as_str().expect("publicKey"))
            .expect("base64url");
        assert_eq!(hex::encode(Sha256::digest(&public)), signed["id"]);
        let signature = URL_SAFE_NO_PAD
            .decode(signed["signature"].as_str().expect("signature"))
            .expect("base64url");
        let payload = format!(
            "v3|{}|gateway-client|backend|operator|operator.read,operator.write|42|tok|n1|linux|",
            device.id()
        );
        UnparsedPublicKey::new(&ED25519, &public)
            .verify(payload.as_bytes(), &signature)
            .expect("the gateway can verify it");
    }

    #[test]
    fn a_damaged_key_file_is_a_clear_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(KEY_FILE), b"not a key").expect("write");
        let Err(e) = Device::load_or_create(dir.path()) else {
            panic!("a damaged key was accepted")
        };
        assert!(e.contains("delete it to make a new one"), "{e}");
    }
}
