#!/usr/bin/python3
"""Rebuild a halfgrad checkpoint as a stock torch.nn model and check it against halfgrad.

    /usr/bin/python3 tools/to_torch.py CHECKPOINT_DIR --texts "the cat" "die Katze"
    /usr/bin/python3 tools/to_torch.py CHECKPOINT_DIR... --data test.tsv [--halfgrad build/bin/halfgrad]
    /usr/bin/python3 tools/to_torch.py CHECKPOINT_DIR --data test.tsv --logits-file predictions.jsonl

The model is built from config.json alone (docs/training.md lists its fields) with torch.nn's own
modules: nn.Embedding for tokens and learned absolute positions, nn.TransformerEncoder of pre-LN
nn.TransformerEncoderLayer (exact erf GELU, no dropout) with a final nn.LayerNorm, pooling (the
mean over real tokens, or the CLS token's output; with bag_skip plus the mean of an nn.LayerNorm
of the token rows) and an nn.Linear head. The weights come from
model.safetensors, read here by hand (an 8-byte header length, a JSON header, raw little-endian
data), so no safetensors package is needed. Texts are tokenized as config.json's tokenizer says,
as halfgrad/data/tokenizer.h does: UTF-8 bytes, hashed char n-grams / words (bench/halfgrad_tokenize.py), or
the checkpoint's sentencepiece.model through python3-sentencepiece (ids + 1); 0 = padding, the CLS
id first with CLS pooling, truncated to max_position_embeddings.

Its logits are compared with `halfgrad predict --logits` (run on the same texts, or read from
--logits-file). Exit codes: 0 when the largest absolute difference is within the tolerance, 1 when
it is not (the difference is printed either way), 2 for bad input, 77 when torch is not installed
(CTest's skip code). Default tolerance: 1e-5 for f32 checkpoints: both sides compute in f32 and
differ only in summation order (1e-8 to 1e-6 on logits of size 1-10); 5e-2 for fp16/bf16 ones,
which halfgrad runs under autocast (f16/bf16 matrix products) while this model stays in f32, so
there the check catches a wrong architecture, not rounding.
"""
import argparse
import hashlib
import json
import math
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import halfgrad_tokenize  # noqa: E402  (halfgrad's hashed tokenizers in Python)

try:
    import numpy as np
    import torch
    from torch import nn
except ImportError as e:
    print(f"to_torch.py: skipped: {e.name} is not installed (Debian: apt-get install python3-torch)", file=sys.stderr)
    sys.exit(77)

SAFETENSORS_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64}


def fail(message):
    print(f"to_torch.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def read_safetensors(path):
    """{name: float32 numpy array} from a .safetensors file (F32, F16, BF16 or F64 tensors)."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        fail(f"{path}: shorter than the 8-byte header length")
    (header_len,) = struct.unpack("<Q", data[:8])
    if 8 + header_len > len(data):
        fail(f"{path}: header length {header_len} runs past the end of the file")
    header = json.loads(data[8 : 8 + header_len])
    body = data[8 + header_len :]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = body[begin:end]
        if info["dtype"] == "BF16":  # the upper half of an f32
            values = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif info["dtype"] in SAFETENSORS_DTYPES:
            values = np.frombuffer(raw, dtype=np.dtype(SAFETENSORS_DTYPES[info["dtype"]]).newbyteorder("<"))
        else:
            fail(f"{path}: tensor '{name}' has dtype {info['dtype']}, expected F32, F16, BF16 or F64")
        tensors[name] = values.astype(np.float32).reshape(info["shape"])
    return tensors


class TorchTextClassifier(nn.Module):
    """halfgrad's TextClassifier (halfgrad/nn/text_classifier.h) in stock torch.nn modules."""

    def __init__(self, config):
        super().__init__()
        for key, expected in {"hidden_act": "gelu", "norm_first": True, "final_layer_norm": True}.items():
            if config.get(key, expected) != expected:  # absent in config.json files older than these fields
                fail(f"config.json: {key} is {config[key]!r}; this tool builds {expected!r}")
        position = config.get("position_embedding_type", "absolute")
        if position not in ("absolute", "none"):
            fail(f"config.json: position_embedding_type is {position!r}; this tool builds 'absolute' or 'none'")
        d_model = config["hidden_size"]
        eps = config.get("layer_norm_eps", 1e-5)
        self.pooling = config["pooling"]
        self.token_embedding = nn.Embedding(config["vocab_size"], d_model)
        # None for a bag of hashed n-grams (position_embedding_type "none"): no positions.
        self.position_embedding = (nn.Embedding(config["max_position_embeddings"], d_model)
                                   if position == "absolute" else None)
        layer = nn.TransformerEncoderLayer(
            d_model, config["num_attention_heads"], config["intermediate_size"], dropout=0.0, activation="gelu",
            layer_norm_eps=eps, batch_first=True, norm_first=True)
        # No encoder for a bag (num_hidden_layers 0): torch's TransformerEncoder needs a layer.
        layers = config["num_hidden_layers"]
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False) if layers > 0 else None
        self.norm = nn.LayerNorm(d_model, eps=eps)  # the final LayerNorm, before pooling
        # bag_skip: the mean of the layer-normed token rows (no positions) is added to the pooled output.
        self.bag_norm = nn.LayerNorm(d_model, eps=eps) if config.get("bag_skip", False) else None
        # encoder_drop_path acts in training only (the branch is always kept at inference): nothing to rebuild.
        self.head = nn.Linear(d_model, config["num_labels"])

    def forward(self, ids, mask):
        """ids, mask: (B, T) int64, mask 1 = real token -> logits (B, K)."""
        x = self.token_embedding(ids)
        if self.position_embedding is not None:
            x = x + self.position_embedding(torch.arange(ids.shape[1]))[None]
        h = self.norm(x if self.encoder is None else self.encoder(x, src_key_padding_mask=mask == 0))
        if self.pooling == "cls":
            pooled = h[:, 0]
        else:  # the mean over real tokens
            m = mask[..., None].to(h.dtype)
            pooled = (h * m).sum(1) / m.sum(1)
        if self.bag_norm is not None:
            m = mask[..., None].to(h.dtype)
            pooled = pooled + (self.bag_norm(self.token_embedding(ids)) * m).sum(1) / m.sum(1)
        return self.head(pooled)

    def load_halfgrad(self, weights):
        """Copies halfgrad's tensors (PyTorch-style names) into the stock modules."""
        used = set()

        def take(name):
            if name not in weights:
                fail(f"model.safetensors: missing tensor '{name}'")
            used.add(name)
            return torch.from_numpy(weights[name].copy())

        state = {
            "token_embedding.weight": take("token_embedding.weight"),
            "norm.weight": take("norm.weight"),
            "norm.bias": take("norm.bias"),
            "head.weight": take("head.weight"),
            "head.bias": take("head.bias"),
        }
        if self.position_embedding is not None:
            state["position_embedding.weight"] = take("position_embedding.weight")
        if self.bag_norm is not None:
            state["bag_norm.weight"] = take("bag_norm.weight")
            state["bag_norm.bias"] = take("bag_norm.bias")
        for i in range(len(self.encoder.layers) if self.encoder is not None else 0):
            src, dst = f"encoder.layers.{i}.", f"encoder.layers.{i}."
            for part in ("weight", "bias"):  # nn.MultiheadAttention packs q, k, v into in_proj
                state[dst + f"self_attn.in_proj_{part}"] = torch.cat(
                    [take(src + f"attn.{p}_proj.{part}") for p in ("q", "k", "v")])
                state[dst + f"self_attn.out_proj.{part}"] = take(src + f"attn.out_proj.{part}")
                state[dst + f"linear1.{part}"] = take(src + f"ff.fc1.{part}")
                state[dst + f"linear2.{part}"] = take(src + f"ff.fc2.{part}")
                state[dst + f"norm1.{part}"] = take(src + f"ln1.{part}")
                state[dst + f"norm2.{part}"] = take(src + f"ln2.{part}")
        unused = sorted(set(weights) - used)
        if unused:
            fail(f"model.safetensors: tensors this architecture does not use: {', '.join(unused)}")
        self.load_state_dict(state, strict=True)


def spm_processor(path):
    """The SentencePiece model at path, loaded once (python3-sentencepiece)."""
    if path not in spm_processor.cache:
        try:
            import sentencepiece  # noqa: PLC0415  (only sentencepiece checkpoints need it)
        except ImportError:
            print("skipped: python3-sentencepiece is not installed", file=sys.stderr)
            sys.exit(77)
        spm_processor.cache[path] = sentencepiece.SentencePieceProcessor(model_file=path)
    return spm_processor.cache[path]


spm_processor.cache = {}


def token_ids(text, tokenizer, checkpoint):
    """One text's ids without CLS: UTF-8 bytes, the hashed n-gram ids of bench/halfgrad_tokenize.py
    (the same ids as halfgrad/data/tokenizer.h: tested there against fastText's known answers), or the
    SentencePiece ids + 1 (0 stays padding)."""
    kind = tokenizer.get("type") if isinstance(tokenizer, dict) else tokenizer
    if kind == "bytes":
        return list(text.encode("utf-8"))
    unbounded = 1 << 62  # truncation to max_len happens in encode(), after CLS
    if kind == "char-ngrams":
        return halfgrad_tokenize.char_ngram_ids(text, tokenizer["buckets"], tokenizer["ngram_min"],
                                                tokenizer["ngram_max"], unbounded)
    if kind == "words":
        return halfgrad_tokenize.word_ids(text, tokenizer["buckets"], tokenizer.get("word_ngrams", 2), unbounded)
    if kind == "sentencepiece":
        sp = spm_processor(os.path.join(checkpoint, tokenizer["model_file"]))
        return [i + 1 for i in sp.encode(text, out_type=int)]
    fail(f"config.json: tokenizer {json.dumps(tokenizer)}: unknown type")


def encode(texts, config, checkpoint):
    """Token ids padded to the longest text, and the mask, as halfgrad/data/tokenizer.h and DataLoader make them."""
    tokenizer = config.get("tokenizer", "bytes")  # absent in config.json files before tokenizers: bytes
    max_len = config["max_position_embeddings"]
    cls = [config["cls_token_id"] if "cls_token_id" in config else 256] if config["pooling"] == "cls" else []
    rows = [(cls + token_ids(t, tokenizer, checkpoint))[:max_len] for t in texts]
    width = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), width, dtype=torch.long)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    return ids, mask


def halfgrad_logits(args, checkpoint, texts):
    """{text: (label, logits)} from `halfgrad predict --logits` or a file of its output."""
    if args.logits_file:
        with open(args.logits_file, encoding="utf-8") as f:
            lines = f.read().splitlines()
    else:
        run = subprocess.run([args.halfgrad, "predict", "--logits", "--checkpoint", checkpoint],
                             input="\n".join(texts) + "\n", capture_output=True, text=True)
        if run.returncode != 0:
            fail(f"{args.halfgrad} predict failed ({run.returncode}): {run.stderr.strip()}")
        lines = run.stdout.splitlines()
    rows = [json.loads(line) for line in lines if line.startswith("{")]
    return {r["text"]: (r["label"], r["logits"]) for r in rows}


# The checks halfgrad's loader applies (docs/robustness.md, "What a loaded checkpoint passes"), so
# this tool never compares logits of a checkpoint halfgrad would refuse.
CAPS = {"num_hidden_layers": 128, "num_attention_heads": 256, "hidden_size": 8192, "intermediate_size": 65536,
        "max_position_embeddings": 4096, "vocab_size": (1 << 28) + 2}


def verify_checkpoint(checkpoint, config, training_args):
    """Checksums of checkpoint.json, caps, vocab_size against the tokenizer; returns the weights, checked."""
    with open(os.path.join(checkpoint, "checkpoint.json"), encoding="utf-8") as f:
        manifest = json.load(f)
    if manifest.get("version") == 2:
        for name, entry in manifest.get("files", {}).items():
            with open(os.path.join(checkpoint, name), "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            if digest != entry.get("sha256"):
                fail(f"{checkpoint}: {name} has SHA-256 {digest} but checkpoint.json records {entry.get('sha256')} "
                     "(corrupted or replaced)")
    for field, cap in CAPS.items():
        if not isinstance(config.get(field), int) or not 0 <= config[field] <= cap:
            fail(f"{checkpoint}/config.json: {field} {config.get(field)!r} is not an integer in [0, {cap}]")
    tokenizer = config.get("tokenizer", {"type": "bytes"})
    kind = tokenizer if isinstance(tokenizer, str) else tokenizer.get("type")
    vocab = 256 if kind == "bytes" else tokenizer.get("buckets", 0) + 1
    vocab += config.get("pooling") == "cls"
    if kind in ("bytes", "char-ngrams", "words") and config["vocab_size"] != vocab:  # the kinds this tool knows
        fail(f"{checkpoint}/config.json: vocab_size {config['vocab_size']} disagrees with the {kind} tokenizer, "
             f"whose vocabulary is {vocab}")
    weights = read_safetensors(os.path.join(checkpoint, "model.safetensors"))
    # fp16 O2 and pure_fp16 compute in an f16 model: 65520 and above round to inf there.
    f16_model = training_args.get("fp16", False) and (training_args.get("fp16_opt_level", "O2") == "O2" or
                                                       training_args.get("pure_fp16", False))
    for name, values in weights.items():
        if not np.all(np.isfinite(values)):
            fail(f"{checkpoint}/model.safetensors: tensor '{name}' holds inf or NaN")
        if f16_model and not np.all(np.isfinite(values.astype(np.float16))):
            fail(f"{checkpoint}/model.safetensors: tensor '{name}' holds a value that is inf in f16")
    return weights


def check(args, checkpoint, texts):
    """Compares one checkpoint's torch logits with halfgrad's; True when within the tolerance."""
    with open(os.path.join(checkpoint, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    if config.get("model_type") != "halfgrad-text-classifier":
        fail(f"{checkpoint}/config.json: model_type is not halfgrad-text-classifier")
    training_args = {}
    state_file = os.path.join(checkpoint, "trainer_state.json")
    if os.path.exists(state_file):
        with open(state_file, encoding="utf-8") as f:
            training_args = json.load(f).get("training_args", {})
    reduced = training_args.get("fp16", False) or training_args.get("bf16", False)
    tolerance = args.tolerance if args.tolerance is not None else (5e-2 if reduced else 1e-5)

    weights = verify_checkpoint(checkpoint, config, training_args)  # before the model is built
    torch.manual_seed(0)
    model = TorchTextClassifier(config)
    model.load_halfgrad(weights)
    model.eval()
    with torch.no_grad():
        ids, mask = encode(texts, config, checkpoint)
        logits = model(ids, mask).double().numpy()

    expected = halfgrad_logits(args, checkpoint, texts)
    labels = [config["id2label"][str(k)] for k in range(config["num_labels"])]
    worst, worst_text, label_mismatches = 0.0, "", 0
    for i, text in enumerate(texts):
        if text not in expected:
            fail(f"halfgrad printed no logits for text {text!r}")
        label, theirs = expected[text]
        diff = float(np.max(np.abs(logits[i] - np.asarray(theirs, dtype=np.float64))))
        if not math.isfinite(diff) or diff > worst:
            worst, worst_text = diff, text
        label_mismatches += labels[int(np.argmax(logits[i]))] != label
    kind = "fp16/bf16" if reduced else "f32"
    print(f"{checkpoint}: {len(texts)} texts, {kind} checkpoint, {config['pooling']} pooling: max |torch - halfgrad| "
          f"logit difference {worst:.3g} (tolerance {tolerance:g}, worst text {worst_text!r}); "
          f"{label_mismatches} predicted labels differ")
    if not (worst <= tolerance):
        print(f"to_torch.py: FAIL: {checkpoint}: max abs diff {worst:.3g} > tolerance {tolerance:g}", file=sys.stderr)
        return False
    return True


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkpoints", nargs="+", metavar="checkpoint",
                        help="checkpoint directories (config.json, model.safetensors), each checked in turn")
    parser.add_argument("--texts", nargs="+", default=[], help="texts to compare on")
    parser.add_argument("--data", help="a label<TAB>text file whose texts to compare on")
    parser.add_argument("--halfgrad", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin", "halfgrad"),
                        help="the halfgrad program (default: build/bin/halfgrad)")
    parser.add_argument("--logits-file", help="JSON lines of `halfgrad predict --logits` instead of running it "
                                              "(one checkpoint only)")
    parser.add_argument("--tolerance", type=float, help="largest allowed |difference| (default: see above)")
    args = parser.parse_args()
    if args.logits_file and len(args.checkpoints) > 1:
        fail("--logits-file holds one checkpoint's logits: give one checkpoint")

    texts = list(args.texts)
    if args.data:
        with open(args.data, encoding="utf-8") as f:
            texts += [line.split("\t", 1)[1] for line in f.read().splitlines() if "\t" in line]
    texts = [t for t in texts if t]  # halfgrad predict skips empty lines
    if not texts:
        fail("no texts: give --texts or --data")
    results = [check(args, checkpoint, texts) for checkpoint in args.checkpoints]
    return 0 if all(results) else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except OSError as e:  # a missing or unreadable file, or halfgrad not found
        fail(f"{e.filename}: {e.strerror}")
    except KeyError as e:
        fail(f"missing field {e} (in config.json, model.safetensors' header or halfgrad's output)")
    except ValueError as e:  # malformed JSON among them
        fail(str(e))
