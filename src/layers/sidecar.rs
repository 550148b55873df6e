//! Reading `<program>.modules.json` (docs/model-directory.md): the module of
//! every instruction of a program and of every node inside its delegate blobs,
//! written at export by `python/runlens_export/modules.py`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::pte::{Instruction, PlanInstructions};

/// The sidecar format this runlens reads.
pub const VERSION: u32 = 1;

/// Why a sidecar cannot be used; every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum SidecarError {
    #[error("cannot read the sidecar {0}")]
    Read(String, #[source] std::io::Error),
    #[error("{0} is not a module sidecar (runlens_modules {VERSION}): {1}; re-export the model directory")]
    Parse(String, String),
    #[error("{0} does not describe this program: {1}; re-export the model directory")]
    Mismatch(String, String),
}

#[derive(Clone, Debug, Deserialize)]
struct Document {
    runlens_modules: u32,
    #[serde(default)]
    method: Option<String>,
    instructions: Vec<InstructionEntry>,
    nodes: Vec<NodeEntry>,
}

#[derive(Clone, Debug, Deserialize)]
struct InstructionEntry {
    chain: usize,
    index: usize,
    op: String,
    module: String,
    /// The edge-graph node it was emitted from (its id in `<program>.graph.json`).
    #[serde(default)]
    node: Option<String>,
}

#[derive(Clone, Debug, Deserialize)]
struct NodeEntry {
    handle: u32,
    module: String,
}

/// A sidecar checked against its program's plan.
#[derive(Clone, Debug)]
pub struct Sidecar {
    pub file: PathBuf,
    /// Module by (chain, instruction).
    instructions: HashMap<(usize, usize), String>,
    /// Module by debug handle.
    nodes: HashMap<u32, String>,
    /// Edge-graph node by (chain, instruction), where the sidecar names one.
    graph_nodes: HashMap<(usize, usize), String>,
}

/// `xnnpack.pte` -> `xnnpack.modules.json`, where the export writes it.
pub fn path_for(program: &Path) -> PathBuf {
    program.with_extension("modules.json")
}

impl Sidecar {
    /// Reads the sidecar at `file` and checks that it names the same operator
    /// or delegate as `plan` for each instruction it lists.
    pub fn read(file: &Path, plan: &PlanInstructions) -> Result<Sidecar, SidecarError> {
        let shown = file.display().to_string();
        let text = std::fs::read(file).map_err(|e| SidecarError::Read(shown.clone(), e))?;
        Self::parse(file, &text, plan)
    }

    pub fn parse(file: &Path, text: &[u8], plan: &PlanInstructions) -> Result<Sidecar, SidecarError> {
        let shown = file.display().to_string();
        let doc: Document = serde_json::from_slice(text).map_err(|e| SidecarError::Parse(shown.clone(), e.to_string()))?;
        if doc.runlens_modules != VERSION {
            return Err(SidecarError::Parse(shown, format!("runlens_modules is {}", doc.runlens_modules)));
        }
        if let Some(method) = doc.method.as_deref().filter(|m| *m != plan.name) {
            return Err(SidecarError::Mismatch(shown, format!("it describes method {method:?}, not {:?}", plan.name)));
        }
        let mut instructions = HashMap::new();
        let mut graph_nodes = HashMap::new();
        for entry in doc.instructions {
            let expected = match plan.get(entry.chain, entry.index) {
                Some(Instruction::Kernel { op }) => plan.operator(op).map(str::to_owned),
                Some(Instruction::Delegate { delegate }) => plan.delegate_backend(delegate).map(|b| format!("delegate {b}")),
                _ => None,
            };
            if expected.as_deref() != Some(entry.op.as_str()) {
                return Err(SidecarError::Mismatch(
                    shown,
                    format!(
                        "chain {} instruction {} is {:?} in the sidecar but {} in the program",
                        entry.chain,
                        entry.index,
                        entry.op,
                        expected.map_or_else(|| "absent or a control instruction".to_owned(), |e| format!("{e:?}"))
                    ),
                ));
            }
            if let Some(node) = entry.node {
                graph_nodes.insert((entry.chain, entry.index), node);
            }
            instructions.insert((entry.chain, entry.index), entry.module);
        }
        let nodes = doc.nodes.into_iter().map(|n| (n.handle, n.module)).collect();
        Ok(Sidecar { file: file.to_path_buf(), instructions, nodes, graph_nodes })
    }

    /// The module of the instruction at `chain`, `index`.
    pub fn instruction(&self, chain: usize, index: usize) -> Option<&str> {
        self.instructions.get(&(chain, index)).map(String::as_str)
    }

    /// The edge-graph node the instruction at `chain`, `index` was emitted from
    /// (its node id in Model Explorer); None in sidecars written before it was recorded.
    pub fn graph_node(&self, chain: usize, index: usize) -> Option<&str> {
        self.graph_nodes.get(&(chain, index)).map(String::as_str)
    }

    /// The module of the edge-graph node with this debug handle.
    pub fn node(&self, handle: u32) -> Option<&str> {
        self.nodes.get(&handle).map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> PlanInstructions {
        PlanInstructions::forward(&["aten::embedding.out"], vec![Instruction::Kernel { op: 0 }, Instruction::Delegate { delegate: 0 }])
    }

    #[test]
    fn reads_a_sidecar_that_fits_the_program() {
        let text = br#"{"runlens_modules": 1, "program": "x.pte", "method": "forward",
            "instructions": [{"chain": 0, "index": 0, "op": "aten::embedding.out", "module": "bert.embeddings", "inherited": false, "handles": [3]},
                             {"chain": 0, "index": 1, "op": "delegate XnnpackBackend", "module": "bert.encoder", "handles": [4]}],
            "nodes": [{"handle": 4, "op": "aten.add.Tensor", "module": "bert.encoder.layer.0"}]}"#;
        let s = Sidecar::parse(Path::new("x.modules.json"), text, &plan()).unwrap();
        assert_eq!(s.instruction(0, 0), Some("bert.embeddings"));
        assert_eq!(s.node(4), Some("bert.encoder.layer.0"));
        assert_eq!(s.node(5), None);
    }

    #[test]
    fn damaged_or_foreign_sidecars_are_errors_naming_the_file() {
        let file = Path::new("models/m/xnnpack.modules.json");
        for text in [
            &b"{\"runlens_modules\": 1, \"instructions\": [{\"chain\": 0"[..],
            b"",
            b"[]",
            b"{\"runlens_modules\": 9, \"instructions\": [], \"nodes\": []}",
            br#"{"runlens_modules": 1, "instructions": [{"chain": 0, "index": 0, "op": "aten::add.out", "module": ""}], "nodes": []}"#,
            br#"{"runlens_modules": 1, "instructions": [{"chain": 0, "index": 7, "op": "aten::embedding.out", "module": ""}], "nodes": []}"#,
            br#"{"runlens_modules": 1, "method": "other", "instructions": [], "nodes": []}"#,
        ] {
            let err = Sidecar::parse(file, text, &plan()).unwrap_err().to_string();
            assert!(err.contains("models/m/xnnpack.modules.json") && err.contains("re-export"), "{err}");
        }
    }
}
