//! The model's chat template: typed text as one user message, formatted the
//! way the model was trained to read a conversation.
//!
//! A Hugging Face checkpoint keeps its template in `chat_template.jinja`
//! beside `tokenizer.json` (transformers 5), or older ones as `chat_template`
//! in `tokenizer_config.json` (a string, or a list of `{name, template}` of
//! which `default` is used). transformers renders it with Jinja2
//! (`apply_chat_template`, in `utils/chat_template_utils.py`); here minijinja
//! renders it with what that environment has:
//!
//! - `trim_blocks` and `lstrip_blocks`, loop controls (`break`, `continue`);
//! - `raise_exception(message)`, `strftime_now(format)` (UTC here; Python's
//!   local time is UTC on the machines runlens tests on), `namespace`, `dict`;
//! - a `tojson` filter that writes what Python's `json.dumps` writes
//!   (`ensure_ascii=False`, `indent`, `separators`, `sort_keys`; no HTML escaping);
//! - Python's string and dict methods (`.strip()`, `.startswith()`,
//!   `.items()`, ...: minijinja-contrib's `pycompat`);
//! - the context `messages`, `add_generation_prompt`, `tools` and `documents`
//!   (none), and the named special tokens of `tokenizer_config.json`
//!   (`bos_token`, `eos_token`, ...; `special_tokens_map.json` overrides them,
//!   as transformers reads it).
//!
//! A template comes with a checkpoint from anywhere: it renders in a sandbox
//! (no loader: `include` and `import` find nothing; no file or code access)
//! and a fuel limit stops one that would run forever.
//!
//! [`PromptFormat`] says whether the typed text goes through the template
//! ([`encode_prompt`]).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use minijinja::value::{Enumerator, Object, ObjectRepr};
use minijinja::{Environment, Error, Value};

use super::tokenizer::TextTokenizer;
use crate::tensor::Encoded;

mod jinja;
use jinja::{describe, environment, without_generation_tags};

/// The file transformers 5 writes the template to, beside `tokenizer.json`.
pub const CHAT_TEMPLATE_FILE: &str = "chat_template.jinja";
/// Where older checkpoints keep it, under `"chat_template"`.
pub const TOKENIZER_CONFIG_FILE: &str = "tokenizer_config.json";
const SPECIAL_TOKENS_MAP_FILE: &str = "special_tokens_map.json";
/// The named special tokens transformers passes to every template
/// (`SPECIAL_TOKENS_ATTRIBUTES` of `PreTrainedTokenizerBase`).
const SPECIAL_TOKEN_NAMES: [&str; 7] = ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"];
/// Instructions one render may run. Rendering one message with the templates
/// of Llama 3, Qwen 2.5/3 or Zephyr takes a few thousand; this allows a
/// hundred times a long conversation and stops a loop in well under a second.
pub const TEMPLATE_FUEL: u64 = 2_000_000;

/// How typed text becomes the model's input.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum PromptFormat {
    /// One user message through the model's chat template, the assistant's turn opened.
    Chat,
    /// The text tokenized as it is (the tokenizer's own BOS, if it adds one).
    Raw,
}

impl PromptFormat {
    /// `chat` for a model with a template, else `raw`.
    pub fn default_for(has_template: bool) -> PromptFormat {
        if has_template {
            PromptFormat::Chat
        } else {
            PromptFormat::Raw
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PromptFormat::Chat => "chat",
            PromptFormat::Raw => "raw",
        }
    }

    /// The other one (the explorer's switch).
    pub fn toggled(self) -> PromptFormat {
        match self {
            PromptFormat::Chat => PromptFormat::Raw,
            PromptFormat::Raw => PromptFormat::Chat,
        }
    }
}

impl fmt::Display for PromptFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for PromptFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<PromptFormat, String> {
        match s {
            "chat" => Ok(PromptFormat::Chat),
            "raw" => Ok(PromptFormat::Raw),
            _ => Err(format!("unknown prompt format {s:?}: use chat or raw")),
        }
    }
}

/// Why a chat prompt could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error("cannot read {}: {source}", path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{}: {message}", path.display())]
    Config { path: PathBuf, message: String },
    #[error("the chat template in {} does not parse: {message}; use the raw prompt format (--prompt-format raw) for this model", path.display())]
    Syntax { path: PathBuf, message: String },
    #[error("the chat template in {} failed: {message}; use the raw prompt format (--prompt-format raw) for this model", path.display())]
    Render { path: PathBuf, message: String },
    #[error("this model has no chat template (no {CHAT_TEMPLATE_FILE} beside its tokenizer.json and no \"chat_template\" in {TOKENIZER_CONFIG_FILE}): use the raw prompt format (--prompt-format raw)")]
    NoTemplate,
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    pub fn user(content: &str) -> ChatMessage {
        ChatMessage { role: "user".to_string(), content: content.to_string() }
    }
}

/// A checkpoint's chat template, compiled, with the special tokens it is rendered with.
#[derive(Clone, Debug)]
pub struct ChatTemplate {
    /// The file it was read from (`chat_template.jinja` or `tokenizer_config.json`).
    path: PathBuf,
    env: Environment<'static>,
    /// `bos_token`, `eos_token`, ... as `tokenizer_config.json` names them.
    special_tokens: BTreeMap<String, String>,
}

/// The template's name inside its environment.
const NAME: &str = "chat_template";

impl ChatTemplate {
    /// The template of the checkpoint or model directory `dir` (the one that
    /// holds `tokenizer.json`): `chat_template.jinja`, else `chat_template` in
    /// `tokenizer_config.json`, as transformers picks it. `Ok(None)`: the
    /// model has none. An error names the file: one that cannot be read, JSON
    /// that does not parse, a template that does not compile.
    pub fn load(dir: &Path) -> Result<Option<ChatTemplate>, ChatError> {
        let config_path = dir.join(TOKENIZER_CONFIG_FILE);
        let config = read_json(&config_path)?;
        let jinja = dir.join(CHAT_TEMPLATE_FILE);
        let (path, source) = if jinja.is_file() {
            let source = std::fs::read_to_string(&jinja).map_err(|source| ChatError::Read { path: jinja.clone(), source })?;
            (jinja, source)
        } else {
            match config.as_ref().and_then(|c| c.get("chat_template")) {
                None | Some(serde_json::Value::Null) => return Ok(None),
                Some(value) => (config_path.clone(), template_of(value).map_err(|message| ChatError::Config { path: config_path.clone(), message })?),
            }
        };
        let mut special_tokens = config.as_ref().map(special_tokens_of).unwrap_or_default();
        if let Some(map) = read_json(&dir.join(SPECIAL_TOKENS_MAP_FILE))? {
            special_tokens.extend(special_tokens_of(&map));
        }
        ChatTemplate::new(source, path, special_tokens).map(Some)
    }

    /// The template in the file `template` (a `.jinja`), rendered with the
    /// special tokens of `tokenizer_config` (a model directory whose manifest
    /// names its files).
    pub fn from_file(template: &Path, tokenizer_config: Option<&Path>) -> Result<ChatTemplate, ChatError> {
        let source = std::fs::read_to_string(template).map_err(|source| ChatError::Read { path: template.to_path_buf(), source })?;
        let special_tokens = match tokenizer_config {
            Some(path) => read_json(path)?.as_ref().map(special_tokens_of).unwrap_or_default(),
            None => BTreeMap::new(),
        };
        ChatTemplate::new(source, template.to_path_buf(), special_tokens)
    }

    /// A template from its source; `path` is what errors name.
    pub fn new(source: String, path: PathBuf, special_tokens: BTreeMap<String, String>) -> Result<ChatTemplate, ChatError> {
        let mut env = environment();
        env.add_template_owned(NAME, without_generation_tags(&source)).map_err(|e| ChatError::Syntax { path: path.clone(), message: describe(&e) })?;
        Ok(ChatTemplate { path, env, special_tokens })
    }

    /// The file the template was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The special tokens it is rendered with (`bos_token` -> `<s>`, ...).
    pub fn special_tokens(&self) -> &BTreeMap<String, String> {
        &self.special_tokens
    }

    /// `text` as one user message with the assistant's turn opened
    /// (`add_generation_prompt=True`), what `apply_chat_template(tokenize=False)` returns.
    pub fn render_prompt(&self, text: &str) -> Result<String, ChatError> {
        self.render(&[ChatMessage::user(text)], true)
    }

    /// A conversation rendered; `add_generation_prompt` opens the assistant's turn.
    pub fn render(&self, messages: &[ChatMessage], add_generation_prompt: bool) -> Result<String, ChatError> {
        let mut ctx: BTreeMap<String, Value> = self.special_tokens.iter().map(|(k, v)| (k.clone(), Value::from(v.as_str()))).collect();
        let messages: Vec<Value> = messages.iter().map(|m| Value::from_object(Message::new(m))).collect();
        ctx.insert("messages".into(), Value::from(messages));
        ctx.insert("add_generation_prompt".into(), Value::from(add_generation_prompt));
        ctx.insert("tools".into(), Value::from(()));
        ctx.insert("documents".into(), Value::from(()));
        let render_error = |e: Error| ChatError::Render { path: self.path.clone(), message: describe(&e) };
        let template = self.env.get_template(NAME).map_err(render_error)?;
        template.render(Value::from(ctx)).map_err(render_error)
    }
}

/// Typed `text` to the ids fed to the model: `Raw` is the tokenizer's encode
/// (with the BOS it adds, if any); `Chat` renders the template and tokenizes
/// the result as `apply_chat_template` does (special tokens written in it
/// recognised, none added). `Chat` without a template is [`ChatError::NoTemplate`].
pub fn encode_prompt(tokenizer: &TextTokenizer, format: PromptFormat, template: Option<&ChatTemplate>, text: &str) -> anyhow::Result<Encoded> {
    match format {
        PromptFormat::Raw => tokenizer.encode(text),
        PromptFormat::Chat => {
            if text.trim().is_empty() {
                anyhow::bail!("the text is empty: type a sentence");
            }
            let template = template.ok_or(ChatError::NoTemplate)?;
            let rendered = template.render_prompt(text)?;
            tokenizer.encode_formatted(&rendered, text)
        }
    }
}

fn read_json(path: &Path) -> Result<Option<serde_json::Value>, ChatError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(ChatError::Read { path: path.to_path_buf(), source }),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| ChatError::Config { path: path.to_path_buf(), message: format!("not valid JSON: {e}") })
}

/// `chat_template` of tokenizer_config.json: a string, or `[{name, template}]` of which `default` is used.
fn template_of(value: &serde_json::Value) -> Result<String, String> {
    match value {
        serde_json::Value::String(s) => Ok(s.clone()),
        serde_json::Value::Array(list) => {
            let named = |n: &str| list.iter().find(|t| t.get("name").and_then(|v| v.as_str()) == Some(n));
            match named("default").and_then(|t| t.get("template")).and_then(|t| t.as_str()) {
                Some(t) => Ok(t.to_string()),
                None => {
                    let names: Vec<&str> = list.iter().filter_map(|t| t.get("name").and_then(|v| v.as_str())).collect();
                    Err(format!("\"chat_template\" lists templates named {names:?} and none is \"default\""))
                }
            }
        }
        _ => Err("\"chat_template\" is neither a string nor a list of {name, template}".to_string()),
    }
}

/// The named special tokens of a tokenizer config: strings, or AddedToken objects (`{"content": ...}`).
fn special_tokens_of(config: &serde_json::Value) -> BTreeMap<String, String> {
    SPECIAL_TOKEN_NAMES
        .iter()
        .filter_map(|&name| {
            let value = config.get(name)?;
            let token = value.as_str().or_else(|| value.get("content").and_then(|c| c.as_str()))?;
            Some((name.to_string(), token.to_string()))
        })
        .collect()
}

/// One message as the template sees it: a map with `role` then `content`, in that order.
#[derive(Debug)]
struct Message {
    role: Value,
    content: Value,
}

impl Message {
    fn new(m: &ChatMessage) -> Message {
        Message { role: Value::from(m.role.as_str()), content: Value::from(m.content.as_str()) }
    }
}

impl Object for Message {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Map
    }

    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        match key.as_str()? {
            "role" => Some(self.role.clone()),
            "content" => Some(self.content.clone()),
            _ => None,
        }
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Str(&["role", "content"])
    }
}

#[cfg(test)]
mod tests {
    use super::jinja::{python_float, strftime};
    use super::*;

    fn template(source: &str) -> ChatTemplate {
        let special = BTreeMap::from([("bos_token".to_string(), "<s>".to_string()), ("eos_token".to_string(), "</s>".to_string())]);
        ChatTemplate::new(source.to_string(), PathBuf::from("/m/chat_template.jinja"), special).unwrap()
    }

    fn render(source: &str, text: &str) -> Result<String, ChatError> {
        template(source).render_prompt(text)
    }

    #[test]
    fn blocks_are_trimmed_as_transformers_configures_jinja() {
        let t = "{% for m in messages %}\n  {% if m.role == 'user' %}\n[{{ m.content }}]\n  {% endif %}\n{% endfor %}\n";
        assert_eq!(render(t, "hi").unwrap(), "[hi]\n");
        assert_eq!(render("{{ bos_token }}{{ messages[0]['content'] }}{{ eos_token }}\n", "x").unwrap(), "<s>x</s>", "one trailing newline dropped");
        assert_eq!(render("{{ unk_token }}|{{ tools is none }}|{{ add_generation_prompt }}", "x").unwrap(), "|True|True", "undefined prints empty, booleans as Python");
    }

    #[test]
    fn python_methods_loop_controls_and_namespaces_work() {
        let t = "{%- set ns = namespace(n=0) -%}\
                 {%- for c in ['a', 'b', 'c', 'd'] -%}{%- if c == 'c' %}{% break %}{% endif %}{% set ns.n = ns.n + 1 %}{%- endfor -%}\
                 {{ ns.n }}|{{ messages[0].content.strip() }}|{{ messages[0].content.startswith('  he') }}|\
                 {%- for k, v in messages[0].items() %}{{ k }}={{ v | trim }};{% endfor %}|{{ messages[::-1] | length }}|{{ 'a</think>b'.split('</think>')[-1] }}";
        assert_eq!(render(t, "  hello ").unwrap(), "2|hello|True|role=user;content=hello;|1|b");
    }

    #[test]
    fn tojson_writes_what_pythons_json_dumps_writes() {
        let t = r#"{{ {"b": [1, 2.5, none, true], "a": "é<\"\n"} | tojson }}|{{ {"b": 1, "a": {}} | tojson(sort_keys=true) }}|{{ [1, {"x": []}] | tojson(indent=2) }}|{{ "é" | tojson(ensure_ascii=true) }}|{{ [1,2] | tojson(separators=(",", ":")) }}"#;
        assert_eq!(
            render(t, "x").unwrap(),
            "{\"b\": [1, 2.5, null, true], \"a\": \"é<\\\"\\n\"}|{\"a\": {}, \"b\": 1}|[\n  1,\n  {\n    \"x\": []\n  }\n]|\"\\u00e9\"|[1,2]"
        );
        for (v, s) in [(1.0, "1.0"), (0.1, "0.1"), (1e-5, "1e-05"), (1e16, "1e+16"), (-2.5e-7, "-2.5e-07"), (123456.789, "123456.789"), (1.5e300, "1.5e+300")] {
            assert_eq!(python_float(v), s);
        }
    }

    #[test]
    fn raise_exception_gives_the_templates_message_and_the_file() {
        let t = "{% if messages[0].role != 'system' %}\n{{ raise_exception('Only system messages, not ' + messages[0].role) }}\n{% endif %}";
        let err = render(t, "hi").unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, ChatError::Render { .. }), "{err:?}");
        assert!(msg.contains("/m/chat_template.jinja") && msg.contains("raise_exception: Only system messages, not user") && msg.contains("line 2"), "{msg}");
        assert!(msg.contains("--prompt-format raw"), "{msg}");
    }

    #[test]
    fn a_syntax_error_is_reported_at_load_with_the_file() {
        let err = ChatTemplate::new("{% for m in messages %}{{ m }".into(), PathBuf::from("/m/tokenizer_config.json"), BTreeMap::new()).unwrap_err();
        assert!(matches!(err, ChatError::Syntax { .. }), "{err:?}");
        assert!(err.to_string().contains("/m/tokenizer_config.json") && err.to_string().contains("syntax error"), "{err}");
    }

    #[test]
    fn a_template_that_runs_forever_is_stopped() {
        let t = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}";
        let err = render(t, "x").unwrap_err().to_string();
        assert!(err.contains("was stopped") && err.contains("chat_template.jinja"), "{err}");
    }

    #[test]
    fn the_sandbox_has_no_files() {
        let err = render("{% include '/etc/passwd' %}", "x").unwrap_err().to_string();
        assert!(err.contains("template not found"), "{err}");
    }

    #[test]
    fn strftime_formats_utc_times() {
        // 2024-07-26 13:25:09 UTC, a Friday, day 208 (Python agrees).
        let t = 1_722_000_309;
        assert_eq!(strftime("%d %b %Y", t), "26 Jul 2024");
        assert_eq!(strftime("%A %B %e, %y %H:%M:%S %I%p %j %F %T %D %% %Q", t), "Friday July 26, 24 13:25:09 01PM 208 2024-07-26 13:25:09 07/26/24 % %Q");
        assert_eq!(strftime("%Y-%m-%d %a", 0), "1970-01-01 Thu");
        assert_eq!(strftime("%Y-%m-%d", 951_782_400), "2000-02-29");
        assert!(render("{{ strftime_now('%Y') }}", "x").unwrap().starts_with("20"));
    }

    #[test]
    fn templates_are_found_as_transformers_finds_them() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert!(ChatTemplate::load(d).unwrap().is_none(), "no files: no template");
        std::fs::write(d.join(TOKENIZER_CONFIG_FILE), r#"{"eos_token": "</s>"}"#).unwrap();
        assert!(ChatTemplate::load(d).unwrap().is_none(), "a config without a template");

        let config = r#"{"bos_token": {"content": "<s>", "lstrip": false, "__type": "AddedToken"}, "eos_token": "</s>",
                         "chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "{{ bos_token }}D{{ eos_token }}"}]}"#;
        std::fs::write(d.join(TOKENIZER_CONFIG_FILE), config).unwrap();
        let t = ChatTemplate::load(d).unwrap().unwrap();
        assert_eq!(t.render_prompt("x").unwrap(), "<s>D</s>");
        assert!(t.path().ends_with(TOKENIZER_CONFIG_FILE));

        std::fs::write(d.join(SPECIAL_TOKENS_MAP_FILE), r#"{"eos_token": {"content": "<|end|>"}}"#).unwrap();
        std::fs::write(d.join(CHAT_TEMPLATE_FILE), "J{{ eos_token }}").unwrap();
        let t = ChatTemplate::load(d).unwrap().unwrap();
        assert_eq!(t.render_prompt("x").unwrap(), "J<|end|>", "the .jinja file wins; special_tokens_map.json overrides");
        assert!(t.path().ends_with(CHAT_TEMPLATE_FILE));
        let t = ChatTemplate::from_file(&d.join(CHAT_TEMPLATE_FILE), Some(&d.join(TOKENIZER_CONFIG_FILE))).unwrap();
        assert_eq!(t.render_prompt("x").unwrap(), "J</s>", "from_file reads the config it is given");
        let err = ChatTemplate::from_file(&d.join("missing.jinja"), None).unwrap_err().to_string();
        assert!(err.contains("missing.jinja"), "{err}");

        std::fs::remove_file(d.join(CHAT_TEMPLATE_FILE)).unwrap();
        std::fs::write(d.join(TOKENIZER_CONFIG_FILE), r#"{"chat_template": [{"name": "tool_use", "template": "T"}]}"#).unwrap();
        let err = ChatTemplate::load(d).unwrap_err().to_string();
        assert!(err.contains("tokenizer_config.json") && err.contains("tool_use") && err.contains("default"), "{err}");
        std::fs::write(d.join(TOKENIZER_CONFIG_FILE), "{not json").unwrap();
        let err = ChatTemplate::load(d).unwrap_err().to_string();
        assert!(err.contains("tokenizer_config.json") && err.contains("not valid JSON"), "{err}");
    }

    #[test]
    fn generation_tags_render_their_body() {
        let t = "{% for m in messages %}{%- generation -%}\n<{{ m.content }}>\n{%- endgeneration %}|{% endfor %}{% if generation_x is defined %}no{% endif %}";
        assert_eq!(render(t, "hi").unwrap(), "<hi>|");
        assert_eq!(without_generation_tags("{%+ generation %}a{%endgeneration-%}{% if x %}"), "{%+ if true  %}a{% endif -%}{% if x %}");
    }

    #[test]
    fn a_template_can_be_shared_between_threads() {
        fn shared<T: Send + Sync + Clone>() {}
        shared::<ChatTemplate>();
    }

    #[test]
    fn prompt_formats_parse_and_default_by_template() {
        assert_eq!("chat".parse::<PromptFormat>(), Ok(PromptFormat::Chat));
        assert_eq!("raw".parse::<PromptFormat>(), Ok(PromptFormat::Raw));
        assert!("json".parse::<PromptFormat>().unwrap_err().contains("chat or raw"));
        assert_eq!(PromptFormat::default_for(true), PromptFormat::Chat);
        assert_eq!(PromptFormat::default_for(false), PromptFormat::Raw);
        assert_eq!(PromptFormat::Chat.toggled(), PromptFormat::Raw);
        assert_eq!(serde_json::to_string(&PromptFormat::Raw).unwrap(), "\"raw\"");
    }
}
