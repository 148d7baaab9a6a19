//! The wake payload handed to an agent process in a file.
//!
//! It used to travel only in `ROOST_WAKE_PAYLOAD_JSON`: a 1 MB payload failed the run with
//! "Argument list too long" (exec refuses environments over the kernel's limit, and a single
//! string over 128 KiB on Linux). The file is written for every run, so an agent can always
//! read `ROOST_WAKE_PAYLOAD_PATH`; the JSON variable stays for small payloads, which is what
//! Paperclip's agents read.

use std::fs::{DirBuilder, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Payloads up to this many bytes also go in the environment.
pub(crate) const ENV_PAYLOAD_MAX_BYTES: usize = 16 * 1024;

/// The directory under the work directory that holds the runs' payload files (0700: a payload
/// can carry what an operator would not show every user of the machine).
const DIR: &str = ".roost-wake";

/// `<work_dir>/.roost-wake/<run id>.json`, 0600, removed when dropped (when the run ends).
pub(crate) struct PayloadFile {
    path: PathBuf,
}

impl PayloadFile {
    pub(crate) fn write(work_dir: &Path, run_id: &str, payload: &str) -> Result<Self, String> {
        // The run id names a file: anything but a plain id (the server makes UUIDs) could
        // point outside the directory.
        let plain = !run_id.is_empty()
            && run_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !plain {
            return Err(format!("run id {run_id:?} cannot name a payload file"));
        }
        let dir = work_dir.join(DIR);
        let failed = |what: &str, path: &Path, e: std::io::Error| {
            format!("wake payload: {what} {}: {e}", path.display())
        };
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| failed("cannot create", &dir, e))?;
        // An older directory keeps its mode through `create`; tighten it.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| failed("cannot restrict", &dir, e))?;
        let path = dir.join(format!("{run_id}.json"));
        // A file left by a crash may have another mode: start afresh.
        let _ = std::fs::remove_file(&path);
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| failed("cannot create", &path, e))?;
        // From here on, a failed write still removes the file (on drop).
        let payload_file = PayloadFile { path };
        file.write_all(payload.as_bytes())
            .map_err(|e| failed("cannot write", &payload_file.path, e))?;
        Ok(payload_file)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PayloadFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
