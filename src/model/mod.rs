//! The model directory and the data that flows in: its manifest, its files,
//! the tokenizer (text -> [`Encoded`]), the chat template and the Python
//! reference outputs, the sentence-transformers layout (`onnx/`, pooling);
//! and the model directories on disk (`listing`: the explorer's model list, F8).
//! What the outputs mean is the [`crate::task`] layer's.

mod chat;
pub mod config;
mod files;
pub mod listing;
pub mod manifest;
mod prompt;
mod reference;
pub mod safetensors;
pub mod sentence_transformers;
mod tokenizer;

pub use chat::{encode_prompt, ChatError, ChatMessage, ChatTemplate, PromptFormat, CHAT_TEMPLATE_FILE};
pub use config::{ConfigFileError, ModelConfig};
pub use files::{ModelDir, ModelsMissing, DEFAULT_MODEL_DIR, MAX_SEQ_LEN};
pub use listing::{list_dirs, list_with, DirEntry, MODELS_ROOT};
pub use manifest::{Manifest, ManifestError, ProgramEntry, Task};
pub use reference::{Reference, ReferenceMask, ReferenceSentence, ReferenceTokenProb};
pub use crate::tensor::Encoded;
pub use prompt::{NoChatTemplate, Prompter};
pub use tokenizer::TextTokenizer;
