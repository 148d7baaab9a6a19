//! The worker's credential: a secret the worker makes at its first start and keeps in a
//! private file (0600, `credential_file`, default `<work_dir>/.roost-worker-credential`). The
//! first registration sends it with the join token, which the cluster exchanges once for it,
//! binding it to the worker id; every later one sends it alone, so the join token is needed
//! only for the first start (`roost-server/src/workers/identity.rs`).
//!
//! It is written, synced and renamed into place before the first registration, so a worker
//! that dies at any point starts again with the same credential and the exchange, repeated,
//! changes nothing. It is never logged.

use std::io::{Read, Write};
use std::path::Path;

use crate::Error;

/// What every worker credential starts with; the server has the same constant.
pub const WORKER_CREDENTIAL_PREFIX: &str = "rst_worker_";

fn well_formed(credential: &str) -> bool {
    credential
        .strip_prefix(WORKER_CREDENTIAL_PREFIX)
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

fn io<'a>(path: &'a Path, what: &'static str) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |e| Error::Credential(format!("cannot {what} {}: {e}", path.display()))
}

/// A fresh credential: the prefix and 32 random bytes in hex.
fn generate() -> Result<String, Error> {
    let source = Path::new("/dev/urandom");
    let mut bytes = [0u8; 32];
    std::fs::File::open(source)
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(io(source, "read"))?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{WORKER_CREDENTIAL_PREFIX}{hex}"))
}

/// Reads the credential kept at `path` (tightening the file to 0600), or makes one there.
/// Returns it and whether it is new.
pub fn load_or_create(path: &Path) -> Result<(String, bool), Error> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let credential = text.trim().to_string();
            if !well_formed(&credential) {
                return Err(Error::Credential(format!(
                    "{} does not hold a worker credential ({WORKER_CREDENTIAL_PREFIX}...); \
                     remove it, and start the worker with a new join token",
                    path.display()
                )));
            }
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
                .map_err(io(path, "tighten"))?;
            return Ok((credential, false));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(path, "read")(e)),
    }
    let credential = generate()?;
    let tmp = path.with_extension("tmp");
    {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(io(&tmp, "create"))?;
        writeln!(f, "{credential}").map_err(io(&tmp, "write"))?;
        f.sync_all().map_err(io(&tmp, "sync"))?;
    }
    std::fs::rename(&tmp, path).map_err(io(path, "create"))?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(io(dir, "sync"))?;
    }
    Ok((credential, true))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_credential_is_made_once_kept_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cred");
        let (made, new) = load_or_create(&path).unwrap();
        assert!(new && well_formed(&made), "{made}");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let (again, new) = load_or_create(&path).unwrap();
        assert_eq!((again.as_str(), new), (made.as_str(), false));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "tightened");
        let (other, _) = load_or_create(&dir.path().join("other")).unwrap();
        assert_ne!(other, made);
        std::fs::write(&path, "rst_join_abc\n").unwrap();
        let err = load_or_create(&path).unwrap_err().to_string();
        assert!(err.contains("does not hold a worker credential"), "{err}");
    }
}
