//! A fresh temporary directory for the Unix socket tests' paths, removed when dropped.

use std::path::PathBuf;

pub struct TempDir(PathBuf);

impl TempDir {
    /// `$TMPDIR/gort-<name>-<pid>`, emptied first.
    pub fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("gort-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// A path in the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
