//! The model files and the data that flows through the program:
//! text -> [`Encoded`] (tokenizer) -> a backend -> [`Embedding`].

mod embedding;
mod files;
mod reference;
mod tokenizer;

pub use embedding::{Embedding, Parity};
pub use files::{ModelDir, ModelsMissing, MAX_SEQ_LEN};
pub use reference::{Reference, ReferenceSentence};
pub use tokenizer::{Encoded, SentenceTokenizer};
