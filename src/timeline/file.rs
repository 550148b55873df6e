//! The trace file: created before any work starts, so a path that cannot be
//! written is an error before a model is loaded, and written once at the end.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::Timeline;

/// `--trace FILE` cannot be created or written (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("--trace {}: cannot write the trace file (name a file in a directory that exists and is writable)", path.display())]
pub struct TraceFileError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// An opened (created, empty) trace file; removed again when dropped
/// unwritten (the command failed before it had results).
#[derive(Debug)]
pub struct TraceFile {
    path: PathBuf,
    file: File,
    written: bool,
}

impl TraceFile {
    /// Creates (or truncates) `path` now.
    pub fn create(path: &Path) -> Result<TraceFile, TraceFileError> {
        let error = |source| TraceFileError { path: path.to_path_buf(), source };
        if path.is_dir() {
            return Err(error(std::io::Error::other("it is a directory; name a file, e.g. trace.json")));
        }
        let file = File::create(path).map_err(error)?;
        Ok(TraceFile { path: path.to_path_buf(), file, written: false })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the timeline as trace-event JSON.
    pub fn write(mut self, timeline: &Timeline) -> Result<(), TraceFileError> {
        let error = |source| TraceFileError { path: self.path.clone(), source };
        let mut out = BufWriter::new(&self.file);
        serde_json::to_writer(&mut out, &timeline.to_json()).map_err(|e| error(e.into()))?;
        out.write_all(b"\n").and_then(|()| out.flush()).map_err(error)?;
        drop(out);
        self.written = true;
        Ok(())
    }
}

impl Drop for TraceFile {
    fn drop(&mut self) {
        if !self.written {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unwritten_trace_file_is_removed_and_a_written_one_is_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        drop(TraceFile::create(&path).unwrap());
        assert!(!path.exists(), "a command that failed leaves no empty trace");
        let mut timeline = Timeline::new();
        timeline.about("command", "test");
        TraceFile::create(&path).unwrap().write(&timeline).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(v["otherData"]["command"], "test");
        let err = TraceFile::create(dir.path()).unwrap_err().to_string();
        assert!(err.contains(&dir.path().display().to_string()), "{err}");
        assert!(TraceFile::create(&dir.path().join("missing/t.json")).is_err());
    }
}
