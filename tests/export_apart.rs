//! `export.py --apart` (python/runlens_export/apart.py): each program lowered and checked
//! in a child forked from the export, so that what one program's step leaves behind is
//! handed back before the next (docs/models.md, peak memory). `make test-models` writes
//! tiny-gpt2's six programs that way (`auto`: two or more programs); here two of them are
//! written again in one process and must be the same bytes with the same manifest entries,
//! so going apart changes what the export holds, not what it writes. And a child killed
//! halfway (as the OOM killer would) ends the export with one message naming it.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// `python/export.py` on tiny-gpt2 as mk/test-models.mk exports it, two programs, into `out`.
fn export(out: &Path, apart: &str) -> Command {
    let mut cmd = Command::new(root().join(".venv/bin/python"));
    cmd.current_dir(root()).arg("python/export.py");
    cmd.args(["--model", "models/checkpoints/tiny-gpt2", "--task", "text-generation", "--max-seq-len", "64"]);
    cmd.args(["--programs", "portable,xnnpack", "--group-size", "32", "--threads", "1", "--no-gguf", "--no-onnx"]);
    cmd.args(["--apart", apart, "--out"]).arg(out);
    cmd
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("runlens-apart-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

fn program_entries(dir: &Path) -> Vec<serde_json::Value> {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    manifest["programs"].as_array().unwrap().iter().filter(|e| e["file"].as_str().unwrap().ends_with(".pte")).cloned().collect()
}

#[test]
fn programs_written_apart_are_the_bytes_one_process_writes() {
    let out = scratch("one-process");
    let output = export(&out, "no").output().expect("python runs");
    assert!(output.status.success(), "the export in one process failed: {}", String::from_utf8_lossy(&output.stderr));
    let apart = root().join("models/tiny-gpt2");
    for file in ["portable.pte", "xnnpack.pte", "portable.modules.json", "xnnpack.modules.json"] {
        let (a, b) = (std::fs::read(apart.join(file)).unwrap(), std::fs::read(out.join(file)).unwrap());
        assert!(a == b, "{file}: written apart ({} bytes) differs from one process's ({} bytes)", a.len(), b.len());
    }
    let ours = program_entries(&out);
    let theirs = program_entries(&apart);
    for entry in &ours {
        let name = &entry["name"];
        let twin = theirs.iter().find(|e| &e["name"] == name).unwrap_or_else(|| panic!("{name} not written apart"));
        assert_eq!(entry, twin, "{name}'s manifest entry");
    }
    assert_eq!(ours.len(), 2);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_child_killed_halfway_ends_the_export_with_one_message_naming_it() {
    let out = scratch("killed");
    let mut child = export(&out, "yes").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("python runs");
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut killed = None;
    // Read to the end (the export's stdout stays open), killing the first child seen.
    for line in stdout.lines().map_while(Result::ok) {
        // "portable: lowered in a process of its own, pid N (--apart), ..."
        match line.split("lowered in a process of its own, pid ").nth(1) {
            Some(rest) if killed.is_none() => {
                let pid: i32 = rest.split(' ').next().unwrap().trim_end_matches(',').parse().unwrap();
                // SAFETY: kill(2) with a pid the export just printed: its child, which it has not
                // reaped yet (it waits for it), so the pid names that process.
                assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
                killed = Some(pid);
            }
            _ => {}
        }
    }
    assert!(killed.is_some(), "no child's line seen");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("portable: the process that lowers it was killed by SIGKILL") && stderr.contains("OOM killer"),
            "names the program and the signal: {stderr}");
    assert!(stderr.contains("--programs"), "says what to do: {stderr}");
    assert!(!stderr.contains("Traceback"), "{stderr}");
    assert!(!out.exists(), "nothing written to {}", out.display());
    let stage = out.with_file_name(format!(".{}.export-tmp", out.file_name().unwrap().to_string_lossy()));
    assert!(!stage.exists(), "the staging folder {} is removed", stage.display());
}
