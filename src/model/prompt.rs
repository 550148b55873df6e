//! Typed text to the ids the model is fed, in the prompt format chosen
//! (`--prompt-format chat|raw`, the explorer's F7): [`Prompter`] holds the
//! tokenizer, the model's chat template (when it has one) and the format now
//! on, shared by the explorer's input line and its switch.

use std::sync::atomic::{AtomicBool, Ordering};

use super::chat::{encode_prompt, ChatTemplate, PromptFormat};
use super::TextTokenizer;
use crate::tensor::Encoded;

/// The tokenizer, the chat template and the prompt format now on.
pub struct Prompter {
    tokenizer: TextTokenizer,
    template: Option<ChatTemplate>,
    chat: AtomicBool,
}

impl std::fmt::Debug for Prompter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prompter").field("format", &self.format()).field("template", &self.template.as_ref().map(ChatTemplate::path)).finish()
    }
}

/// `--prompt-format chat` for a model without a chat template.
#[derive(Debug, thiserror::Error)]
#[error(
    "--prompt-format chat: this model has no chat template (no chat_template.jinja beside its tokenizer, no chat_template \
     in its tokenizer_config.json); use --prompt-format raw, or export a checkpoint that has one"
)]
pub struct NoChatTemplate;

impl Prompter {
    /// `asked` (`--prompt-format`), else chat when the model has a template, else raw.
    pub fn new(tokenizer: TextTokenizer, template: Option<ChatTemplate>, asked: Option<PromptFormat>) -> Result<Prompter, NoChatTemplate> {
        let format = asked.unwrap_or(PromptFormat::default_for(template.is_some()));
        if format == PromptFormat::Chat && template.is_none() {
            return Err(NoChatTemplate);
        }
        Ok(Prompter { tokenizer, template, chat: AtomicBool::new(format == PromptFormat::Chat) })
    }

    pub fn tokenizer(&self) -> &TextTokenizer {
        &self.tokenizer
    }

    pub fn template(&self) -> Option<&ChatTemplate> {
        self.template.as_ref()
    }

    /// The format now on.
    pub fn format(&self) -> PromptFormat {
        if self.chat.load(Ordering::Relaxed) {
            PromptFormat::Chat
        } else {
            PromptFormat::Raw
        }
    }

    /// Switch between chat and raw; an error (nothing changes) for a model without a template.
    pub fn toggle(&self) -> Result<PromptFormat, NoChatTemplate> {
        let next = self.format().toggled();
        if next == PromptFormat::Chat && self.template.is_none() {
            return Err(NoChatTemplate);
        }
        self.chat.store(next == PromptFormat::Chat, Ordering::Relaxed);
        Ok(next)
    }

    /// `text` in the format now on: the ids fed to the model.
    pub fn encode(&self, text: &str) -> anyhow::Result<Encoded> {
        encode_prompt(&self.tokenizer, self.format(), self.template.as_ref(), text)
    }
}
