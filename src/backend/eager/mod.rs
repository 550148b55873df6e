//! PyTorch eager: the BERT encoder written with tch operations, each one
//! dispatched by libtorch as it comes, as a PyTorch user runs the model.
//!
//! - [`config`]: `config.json` -> [`BertConfig`];
//! - [`weights`]: `model.safetensors`, read once, every tensor checked by name and shape;
//! - [`bert`]: the modules of transformers' `BertModel`, and the sentence-transformers pooling.

pub mod bert;
pub mod config;
pub mod weights;

use std::path::PathBuf;

use anyhow::{ensure, Context};
use tch::{Kind, Tensor};

use crate::backend::Backend;
use crate::model::{Encoded, ModelDir};
use crate::task::{OutputTensor, Task};

pub use config::{BertConfig, ConfigError, HiddenAct};
pub use weights::WeightError;

/// The eager path: a BERT checkpoint in libtorch tensors, ready to embed sentences.
pub struct EagerBackend {
    config: BertConfig,
    weights_file: PathBuf,
    bert: bert::BertModel,
}

impl EagerBackend {
    /// Read `config.json` and `model.safetensors` from `dir`. A missing file is
    /// [`crate::model::ModelsMissing`]; a config the encoder cannot run is a
    /// [`ConfigError`]; a missing or mis-shaped tensor is a [`WeightError`] naming it.
    pub fn load(dir: &ModelDir) -> anyhow::Result<EagerBackend> {
        anyhow::ensure!(
            dir.task() == Task::FeatureExtraction,
            "the eager path runs BertModel for feature-extraction only; this directory is {}",
            dir.task()
        );
        let config_file = dir.config()?;
        let weights_file = dir.weights()?;
        let config = BertConfig::load(&config_file)?;
        let _no_grad = tch::no_grad_guard();
        let weights = weights::Weights::read(&weights_file)?;
        // transformers saves a bare `BertModel` with root keys, a task model under `bert.`.
        let prefix = if !weights.contains("embeddings.word_embeddings.weight")
            && weights.contains("bert.embeddings.word_embeddings.weight")
        {
            "bert"
        } else {
            ""
        };
        let bert = bert::BertModel::load(&weights.root(prefix), &config)?;
        Ok(EagerBackend {
            config,
            weights_file,
            bert,
        })
    }

    pub fn config(&self) -> &BertConfig {
        &self.config
    }

    /// Inputs the model cannot take, caught before they reach libtorch.
    fn check(&self, input: &Encoded) -> anyhow::Result<()> {
        let len = input.ids.len();
        ensure!(len > 0, "the input has no tokens");
        ensure!(
            len as i64 <= self.config.max_position_embeddings,
            "the input has {len} tokens; the model takes at most {} (max_position_embeddings)",
            self.config.max_position_embeddings
        );
        ensure!(
            input.attention_mask.len() == len,
            "the attention mask has {} entries for {len} tokens",
            input.attention_mask.len()
        );
        if let Some(&id) = input.ids.iter().find(|&&id| !(0..self.config.vocab_size).contains(&id)) {
            anyhow::bail!(
                "token id {id} is outside the vocabulary (vocab_size {})",
                self.config.vocab_size
            );
        }
        Ok(())
    }
}

impl Backend for EagerBackend {
    fn describe(&self) -> String {
        let c = &self.config;
        format!(
            "PyTorch eager (libtorch via tch): BERT {} layers, hidden {}, {} heads, from {}, {} intra-op threads",
            c.num_hidden_layers,
            c.hidden_size,
            c.num_attention_heads,
            self.weights_file.display(),
            tch::get_num_threads()
        )
    }

    fn run(&mut self, input: &Encoded) -> anyhow::Result<OutputTensor> {
        self.check(input)?;
        // Grad mode is per thread in libtorch, and a backend may run on any thread.
        let _no_grad = tch::no_grad_guard();
        let ids = Tensor::f_from_slice(&input.ids)?; // [S]
        let mask = Tensor::f_from_slice(&input.attention_mask)?.f_to_kind(Kind::Float)?; // [S]
                                                                                         // One unpadded sentence (the usual case) needs no additive mask: it would add zeros.
        let all_real = input.attention_mask.iter().all(|&m| m == 1);
        let hidden = self
            .bert
            .forward(&ids, (!all_real).then_some(&mask))
            .context("eager BERT forward")?; // [S, H]
        let pooled = bert::mean_pooling(&hidden, &mask)?; // [H]
        let embedding = bert::l2_normalize(&pooled)?;
        let values = Vec::<f32>::try_from(&embedding)?;
        Ok(OutputTensor::new(vec![1, values.len()], values))
    }
}
