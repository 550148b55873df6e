"""The Llama-family decoders of tests/python/tiny_checkpoint.py: a tiny seeded
random-weight checkpoint per family, each with a tokenizer trained on the
assets text and a chat template in its family's shape, saved as transformers 5
saves a downloaded checkpoint (config.json, generation_config.json,
model.safetensors, tokenizer.json, tokenizer_config.json, chat_template.jinja).

  llama      LlamaForCausalLM as Llama 3 has it: 4 heads / 2 KV heads, llama3
             rope scaling (original 32 positions, so it bends the low
             frequencies of a 64-token window), untied head, eos a list of
             three ids; byte-level BPE with Llama 3's regex split and special
             tokens, <|begin_of_text|> added on encode; a Llama-3.1-style template.
  qwen2      Qwen2ForCausalLM as Qwen2.5 has it: q/k/v biases, 1 KV head, tied;
             byte-level BPE with NFC and Qwen's regex, <|endoftext|>,
             <|im_start|>, <|im_end|>, no BOS; ChatML with the default system
             message; eos <|im_end|> (generation_config: <|im_end|>, <|endoftext|>).
  qwen3      Qwen3ForCausalLM: q/k norms, head_dim 24 (hidden 64 / 4 heads
             would be 16), 2 KV heads, tied; Qwen's tokenizer plus <think> and
             </think> (added, not special); a Qwen3-style template.
  llama2-sp  LlamaForCausalLM as TinyLlama has it (untied, 4 heads / 1 KV head,
             no rope scaling); a SentencePiece-style BPE: Metaspace "▁", byte
             fallback to <0xNN> (the assets' accents, CJK and emoji are not in
             its alphabet), <s> added on encode, decoder Replace + ByteFallback
             + Fuse + Strip; a Zephyr-style template as TinyLlama-Chat's.

Sizes unlike any published model's (hidden 64, 2 layers); `--size smollm2-135m`
(llama) and `--size qwen2.5-0.5b` (qwen2) give those models' published sizes
for the figures (FIGURE_SIZES), with random weights; `--size hub` (llama, qwen2,
llama2-sp) the tiny model laid out as the hub ships a checkpoint
(python/hub_checkpoints.py). Training is
deterministic: the same seed writes the same files.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import torch

# Llama 3's and Qwen2's pre-tokenizer regexes (their tokenizer.json's Split).
LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Llama 3.1's template in shape (system message taken out of the list, its
# date lines, headers, <|eot_id|>, raise_exception for what it cannot take),
# without the tool-calling branches. The date is fixed (the published 3.2
# template asks strftime_now, which would make the rendered prompt depend on the day).
LLAMA3_TEMPLATE = """{{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {%- if message['role'] not in ['user', 'assistant'] %}
        {{- raise_exception("Conversation roles must be user or assistant after the system message, not " + message['role']) }}
    {%- endif %}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}
    {%- endif %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

# Qwen2.5-Instruct's template without its tool branches: the default system
# message when the conversation has none, ChatML turns.
QWEN2_TEMPLATE = """{%- if messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
{%- else %}
    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

# Qwen3's template without its tool branches: the last user query found by a
# reversed loop over a namespace, assistant turns split at </think>, and
# enable_thinking=false writing an empty think block after the generation prompt.
QWEN3_TEMPLATE = """{%- if messages[0].role == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}
{%- for message in messages[::-1] %}
    {%- set index = (messages|length - 1) - loop.index0 %}
    {%- if ns.multi_step_tool and message.role == "user" and message.content is string and not(message.content.startswith('<tool_response>') and message.content.endswith('</tool_response>')) %}
        {%- set ns.multi_step_tool = false %}
        {%- set ns.last_query_index = index %}
    {%- endif %}
{%- endfor %}
{%- for message in messages %}
    {%- if message.content is string %}
        {%- set content = message.content %}
    {%- else %}
        {%- set content = '' %}
    {%- endif %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}
            {%- set reasoning_content = message.reasoning_content %}
        {%- else %}
            {%- if '</think>' in content %}
                {%- set reasoning_content = content.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}
                {%- set content = content.split('</think>')[-1].lstrip('\\n') %}
            {%- endif %}
        {%- endif %}
        {%- if loop.index0 > ns.last_query_index and (loop.last or (not loop.last and reasoning_content)) %}
            {{- '<|im_start|>' + message.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}
        {%- else %}
            {{- '<|im_start|>' + message.role + '\\n' + content }}
        {%- endif %}
        {{- '<|im_end|>\\n' }}
    {%- else %}
        {{- raise_exception('Unknown role: ' + message.role) }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\\n\\n</think>\\n\\n' }}
    {%- endif %}
{%- endif %}
"""

# TinyLlama-1.1B-Chat's (Zephyr's) template as published.
ZEPHYR_TEMPLATE = """{% for message in messages %}
{% if message['role'] == 'user' %}
{{ '<|user|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'system' %}
{{ '<|system|>
' + message['content'] + eos_token }}
{% elif message['role'] == 'assistant' %}
{{ '<|assistant|>
'  + message['content'] + eos_token }}
{% endif %}
{% if loop.last and add_generation_prompt %}
{{ '<|assistant|>' }}
{% endif %}
{% endfor %}"""


@dataclass(frozen=True)
class Decoder:
    family: str  # llama | qwen2 | qwen3
    tokenizer: str  # llama3 | qwen | sentencepiece
    vocab: int  # tokens the BPE trainer aims for (specials included)
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int | None
    ffn: int
    positions: int
    tied: bool
    rope: dict
    template: str
    sizes: tuple = ("tiny",)


DECODERS = {
    "llama": Decoder("llama", "llama3", 700, 64, 2, 4, 2, None, 128, 256, False,
                     {"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
                     LLAMA3_TEMPLATE),
    "qwen2": Decoder("qwen2", "qwen", 600, 64, 2, 4, 1, None, 160, 256, True,
                     {"rope_type": "default", "rope_theta": 1000000.0}, QWEN2_TEMPLATE),
    "qwen3": Decoder("qwen3", "qwen", 640, 64, 2, 4, 2, 24, 128, 256, True,
                     {"rope_type": "default", "rope_theta": 1000000.0}, QWEN3_TEMPLATE),
    "llama2-sp": Decoder("llama", "sentencepiece", 520, 64, 2, 4, 1, None, 176, 256, False,
                         {"rope_type": "default", "rope_theta": 10000.0}, ZEPHYR_TEMPLATE),
}

# Published models' sizes for the figures (random weights: timings depend on the
# shapes only). The tokenizer stays the small trained one of the family; the
# config's vocab_size is the published one (as Qwen2.5's own config is larger
# than its tokenizer), so the embedding and the head have their real size.
FIGURE_SIZES = {
    # HuggingFaceTB/SmolLM2-135M(-Instruct): config.json's sizes
    "smollm2-135m": ("llama", dict(hidden=576, layers=30, heads=9, kv_heads=3, head_dim=None, ffn=1536, positions=8192,
                                   tied=True, rope={"rope_type": "default", "rope_theta": 100000.0}), 49152),
    # Qwen/Qwen2.5-0.5B(-Instruct): config.json's sizes
    "qwen2.5-0.5b": ("qwen2", dict(hidden=896, layers=24, heads=14, kv_heads=2, head_dim=None, ffn=4864, positions=32768,
                                   tied=True, rope={"rope_type": "default", "rope_theta": 1000000.0}), 151936),
}
for _size, (_arch, _, _) in FIGURE_SIZES.items():
    DECODERS[_arch] = replace(DECODERS[_arch], sizes=DECODERS[_arch].sizes + (_size,))
# `--size hub` (python/hub_checkpoints.py): the tiny model written as the hub ships a
# checkpoint: bfloat16, sharded with an index, a position limit of 4096, an end-id list.
for _arch in ("llama", "qwen2", "llama2-sp"):
    DECODERS[_arch] = replace(DECODERS[_arch], sizes=DECODERS[_arch].sizes + ("hub",))

LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                   "<|eom_id|>", "<|eot_id|>"]
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def byte_level_tokenizer(kind: str, vocab: int, lines: list[str], think: bool = False):
    """Byte-level BPE as Llama 3 (kind llama3) or Qwen2 (kind qwen) declares it:
    a regex Split, then ByteLevel without its own regex; the special tokens
    first, so their ids are 0.. (the published ones put them last; nothing reads
    the ids' order)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    specials = LLAMA3_SPECIALS if kind == "llama3" else QWEN_SPECIALS
    tok = Tokenizer(models.BPE())
    if kind == "qwen":
        tok.normalizer = normalizers.NFC()
    split = LLAMA3_SPLIT if kind == "llama3" else QWEN2_SPLIT
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(split), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, min_frequency=2, special_tokens=[AddedToken(s, special=True, normalized=False) for s in specials],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(lines, trainer=trainer)
    if kind == "llama3":
        bos = "<|begin_of_text|>"
        tok.post_processor = processors.Sequence([
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(single=f"{bos}:0 $A:0", pair=f"{bos}:0 $A:0 {bos}:1 $B:1",
                                          special_tokens=[(bos, tok.token_to_id(bos))]),
        ])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    if think:
        tok.add_tokens([AddedToken("<think>", special=False, normalized=False),
                        AddedToken("</think>", special=False, normalized=False)])
    return tok


def sentencepiece_tokenizer(vocab: int, lines: list[str]):
    """A SentencePiece-style BPE as Llama 2's tokenizer.json declares it: <unk>
    <s> </s> at 0 1 2, the 256 byte tokens <0x00>..<0xFF> at 3..258, then the
    trained pieces; Metaspace "▁" (prepended to the first word only), byte
    fallback for what the pieces cannot spell, <s> added by the post-processor,
    decoder Replace("▁", " ") + ByteFallback + Fuse + Strip(one leading space).
    The alphabet is capped, so rare characters (accents, CJK, emoji) fall back to bytes."""
    import json

    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    trainer_tok = Tokenizer(models.BPE(unk_token="<unk>"))
    trainer_tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(vocab_size=vocab - 256, min_frequency=2, special_tokens=["<unk>", "<s>", "</s>"],
                                  limit_alphabet=60, show_progress=False)
    trainer_tok.train_from_iterator(lines, trainer=trainer)
    trained = json.loads(trainer_tok.to_str())["model"]
    pieces = sorted(trained["vocab"].items(), key=lambda kv: kv[1])
    vocab_map = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab_map[f"<0x{b:02X}>"] = len(vocab_map)
    for piece, _ in pieces:
        if piece not in vocab_map:
            vocab_map[piece] = len(vocab_map)
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in trained["merges"]]
    tok = Tokenizer(models.BPE(vocab=vocab_map, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    tok.decoder = decoders.Sequence([
        decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0),
    ])
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in ("<unk>", "<s>", "</s>")])
    tok.post_processor = processors.TemplateProcessing(single="<s>:0 $A:0", pair="<s>:0 $A:0 <s>:1 $B:1",
                                                       special_tokens=[("<s>", 1)])
    return tok


def decoder_tokenizer(d: Decoder, lines: list[str]):
    """The family's tokenizer trained on `lines`: (the fast tokenizer, bos id, config.json's eos, generation_config's end ids)."""
    from transformers import PreTrainedTokenizerFast

    if d.tokenizer == "sentencepiece":
        tok = sentencepiece_tokenizer(d.vocab, lines)
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                       model_max_length=2048, padding_side="left")
        bos, eos, eos_list = fast.bos_token_id, fast.eos_token_id, None
    elif d.tokenizer == "llama3":
        tok = byte_level_tokenizer("llama3", d.vocab, lines)
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                                       model_max_length=131072)
        ids = tok.token_to_id
        bos = ids("<|begin_of_text|>")
        eos_list = [ids("<|end_of_text|>"), ids("<|eom_id|>"), ids("<|eot_id|>")]
        eos = eos_list
    else:
        tok = byte_level_tokenizer("qwen", d.vocab, lines, think=d.family == "qwen3")
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                       model_max_length=131072)
        bos = None
        eos = tok.token_to_id("<|im_end|>")
        eos_list = [eos, tok.token_to_id("<|endoftext|>")]
    fast.chat_template = d.template
    return fast, bos, eos, eos_list


def decoder_model(d: Decoder, vocab: int, seed: int, init_range: float, bos, eos):
    """The family's model with seeded random weights, float32."""
    import transformers as tf

    common = dict(
        vocab_size=vocab, hidden_size=d.hidden, intermediate_size=d.ffn, num_hidden_layers=d.layers,
        num_attention_heads=d.heads, num_key_value_heads=d.kv_heads, max_position_embeddings=d.positions,
        initializer_range=init_range, rms_norm_eps=1e-5 if d.family == "llama" else 1e-6,
        tie_word_embeddings=d.tied, bos_token_id=bos, eos_token_id=eos, rope_parameters=dict(d.rope),
    )
    if d.head_dim is not None:
        common["head_dim"] = d.head_dim
    if d.family == "llama":
        config, cls = tf.LlamaConfig(**common), tf.LlamaForCausalLM
    elif d.family == "qwen2":
        config, cls = tf.Qwen2Config(**common, use_sliding_window=False), tf.Qwen2ForCausalLM
    else:
        config, cls = tf.Qwen3Config(**common, use_sliding_window=False), tf.Qwen3ForCausalLM
    torch.manual_seed(seed)
    model = cls(config).eval()
    if d.family == "qwen2":
        # Biases are zero-initialised; make them count.
        with torch.no_grad():
            for layer in model.model.layers:
                for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                    proj.bias.normal_(0.0, init_range)
    return model


def build_decoder(arch: str, size: str, seed: int, init_range: float, out: Path, lines: list[str]):
    """Write the checkpoint of `arch` into `out`; returns the model."""
    from transformers import GenerationConfig

    if size == "hub":
        from hub_layout import build_hub_decoder

        return build_hub_decoder(DECODERS[arch], seed, init_range, out, lines)
    d, vocab_size = DECODERS[arch], None
    if size in FIGURE_SIZES:
        _, sizes, vocab_size = FIGURE_SIZES[size]
        d = replace(d, **sizes)
    fast, bos, eos, eos_list = decoder_tokenizer(d, lines)
    model = decoder_model(d, vocab_size or len(fast), seed, init_range, bos, eos)
    model.generation_config = GenerationConfig(
        bos_token_id=bos, eos_token_id=eos_list if eos_list is not None else eos,
        pad_token_id=fast.pad_token_id,
    )
    model.save_pretrained(str(out), safe_serialization=True)
    fast.save_pretrained(str(out))
    return model
