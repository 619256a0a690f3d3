"""The reference's settings: a model's sizes (ModelConfig) and the training recipe one
optimizer step needs (TrainConfig), and reading them from `tessel compile --emit=graph` (the
graph IR's module attributes: parse_graph, graph_of), so that no number is copied by hand.

reference.py imports every name here; its callers use them from there.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple


# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------


@dataclass
class ModelConfig:
    """The sizes a model needs; the names are the dim names of the .model file."""

    kind: str  # "gpt", "llama" or "masks"
    vocab: int
    seq: int
    embed: int
    heads: int
    head: int
    ffn: int
    layers: int
    kv_heads: Optional[int] = None  # Llama only; GPT uses `heads` for keys and values too
    norm_eps: float = 1e-5  # layernorm / rmsnorm epsilon (std blocks use 1e-5)
    rope_theta: float = 10000.0
    window: Optional[int] = None  # masks only: the sliding window of its attention
    experts: Optional[int] = None  # mixtral only: experts, the tokens of a sequence each
    capacity: Optional[int] = None  # takes, the experts each token uses and the weights of
    top_k: Optional[int] = None  # the auxiliary losses (the model's constants)
    aux_loss_weight: float = 0.0
    z_loss_weight: float = 0.0

    def __post_init__(self):
        if self.kind not in ("gpt", "llama", "masks", "mixtral"):
            raise ValueError(f"unknown model kind {self.kind!r} "
                             "(expected gpt, llama, masks or mixtral)")
        if self.kind == "mixtral" and None in (self.experts, self.capacity, self.top_k):
            raise ValueError("a mixtral model needs experts, capacity and top_k")
        if self.kind == "masks" and self.window is None:
            raise ValueError("a masks model needs window")
        if self.kind in ("llama", "mixtral"):
            if self.kv_heads is None:
                raise ValueError("a llama model needs kv_heads")
            if self.heads % self.kv_heads:
                raise ValueError(f"kv_heads={self.kv_heads} must divide heads={self.heads}")
            if self.head % 2:
                raise ValueError(f"rope needs an even head size, got head={self.head}")

    @staticmethod
    def from_dims(kind: str, dims: Dict[str, int], layers: int,
                  constants: Optional[Dict[str, float]] = None) -> "ModelConfig":
        """Builds a config from the module attribute `tessel.dims` and `tessel.layers`, and
        for a mixture of experts the model's constants top_k, aux_loss_weight and
        z_loss_weight."""
        constants = constants or {}
        top_k = constants.get("top_k")
        return ModelConfig(kind=kind, vocab=dims["vocab"], seq=dims["seq"], embed=dims["embed"],
                           heads=dims["heads"], head=dims["head"], ffn=dims["ffn"],
                           layers=layers, kv_heads=dims.get("kv_heads"),
                           window=dims.get("window"), experts=dims.get("experts"),
                           capacity=dims.get("capacity"),
                           top_k=None if top_k is None else int(top_k),
                           aux_loss_weight=float(constants.get("aux_loss_weight", 0.0)),
                           z_loss_weight=float(constants.get("z_loss_weight", 0.0)))


@dataclass
class TrainConfig:
    """The `train` section, as far as one optimizer step needs it."""

    batch: int  # sequences per optimizer step
    micro_batch: int  # sequences per forward/backward pass
    steps: int  # the spec's total steps: the schedule's horizon even if a run is cut short
    lr: float
    betas: Tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    clip: float = 0.0  # 0 = off
    schedule: str = "constant"  # "constant", "cosine" or "linear"
    warmup: int = 0
    min_lr: float = 0.0
    optimizer: str = "adamw"
    momentum: float = 0.0  # sgd only
    seed: int = 1337
    # The parameter classes weight decay falls on (the recipe's `decay`): by default the
    # matrices, as nanoGPT (`p.dim() >= 2`) and llm.c decay them.
    decay: Tuple[str, ...] = ("weights", "embeddings")

    @property
    def accumulation(self) -> int:
        return self.batch // self.micro_batch

    @staticmethod
    def from_attr(train: dict) -> "TrainConfig":
        """Builds a config from the module attribute `tessel.train` (parsed into a dict)."""
        opt = train.get("optimizer", {})
        sched = train.get("lr_schedule", {"kind": "constant"})
        # `batch` is over all dp ranks and micro_batch per rank; one process here runs all of
        # them, so the reference's micro-batch is the global one: batch / accumulation.
        accumulation = int(train.get("accumulation", train["batch"] // train["micro_batch"]))
        return TrainConfig(
            batch=int(train["batch"]), micro_batch=int(train["batch"]) // accumulation,
            steps=int(train["steps"]), lr=float(opt.get("lr", 1e-3)),
            betas=(float(opt.get("beta1", 0.9)), float(opt.get("beta2", 0.999))),
            eps=float(opt.get("eps", 1e-8)), weight_decay=float(opt.get("weight_decay", 0.0)),
            clip=float(train.get("clip", 0.0)), schedule=str(sched.get("kind", "constant")),
            warmup=int(sched.get("warmup", 0)), min_lr=float(sched.get("min_lr", 0.0)),
            optimizer=str(opt.get("kind", "adamw")), momentum=float(opt.get("momentum", 0.0)),
            seed=int(train.get("seed", 1337)),
            decay=tuple(w for w in str(opt.get("decay", "weights,embeddings")).split(",") if w))


# ---------------------------------------------------------------------------------------------
# The graph IR's module attributes: the config without duplicating numbers by hand
# ---------------------------------------------------------------------------------------------


class _AttrParser:
    """A small parser for MLIR attribute dictionaries as `tessel compile --emit=graph` prints
    them: {key = value, ...} with integers and floats typed (`16 : i64`, `1.0e+00 : f64`),
    strings, true/false, nested dictionaries and arrays; a key without `=` is a unit
    attribute (true). The module's settings (`#tessel.train<key = value, ...>`, nested
    sections as `<...>`) read as dictionaries too; the fields they leave out are at their
    defaults (SETTINGS_DEFAULTS)."""

    _TOKEN = re.compile(r'\s*(?:("(?:[^"\\]|\\.)*")|([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)'
                         r'|([A-Za-z_][\w.$-]*)|([{}\[\]=,:<>()]))')

    def __init__(self, text: str, pos: int = 0):
        self.text, self.pos = text, pos

    def _peek(self):
        m = self._TOKEN.match(self.text, self.pos)
        if not m:
            raise ValueError(f"cannot parse attributes at: {self.text[self.pos:self.pos + 40]!r}")
        return m

    def _next(self):
        m = self._peek()
        self.pos = m.end()
        return m

    def _expect(self, punct: str):
        m = self._next()
        if m.group(4) != punct:
            raise ValueError(f"expected {punct!r} at: {self.text[m.start():m.start() + 40]!r}")

    def _is(self, punct: str) -> bool:
        m = self._TOKEN.match(self.text, self.pos)
        return bool(m) and m.group(4) == punct

    def parse_dict(self, close: str = "}") -> dict:
        self._expect("{" if close == "}" else "<")
        out = {}
        if self._is(close):
            self._next()
            return out
        while True:
            m = self._next()
            key = json.loads(m.group(1)) if m.group(1) else m.group(3)
            if key is None:
                raise ValueError(f"expected a key at: {self.text[m.start():m.start() + 40]!r}")
            if self._is("="):
                self._next()
                out[key] = self.parse_value()
            else:
                out[key] = True
            m = self._next()
            if m.group(4) == close:
                return out
            if m.group(4) != ",":
                raise ValueError(f"expected ',' or {close!r} at: "
                                 f"{self.text[m.start():m.start() + 40]!r}")

    def parse_value(self):
        if self._is("{"):
            return self.parse_dict()
        settings = re.compile(r"\s*#tessel\.\w+(?=<)").match(self.text, self.pos)
        if settings:
            self.pos = settings.end()
        if self._is("<"):
            return self.parse_dict(close=">")
        if self._is("["):
            self._next()
            items = []
            if self._is("]"):
                self._next()
                return items
            while True:
                items.append(self.parse_value())
                m = self._next()
                if m.group(4) == "]":
                    return items
                if m.group(4) != ",":
                    raise ValueError("expected ',' or ']' in an array")
        m = self._next()
        if m.group(1):
            value = json.loads(m.group(1))
        elif m.group(2):
            s = m.group(2)
            value = float(s) if any(ch in s for ch in ".eE") else int(s)
        elif m.group(3) in ("true", "false"):
            value = m.group(3) == "true"
        elif m.group(3):
            value = m.group(3)
        else:
            raise ValueError(f"unexpected {m.group(0)!r} in attributes")
        if self._is(":"):  # a type: `16 : i64`, `1.0 : f64`
            self._next()
            ty = self._next().group(3)
            if isinstance(value, (int, float)) and ty and ty.startswith("f"):
                value = float(value)
        return value


# The defaults of the settings' fields that the checks read without a default of their own:
# tessel/Dialect/Settings/IR/SettingsAttrs.td states them, and the IR leaves out a field at
# its default.
SETTINGS_DEFAULTS = {"tessel.train": {"batch": 1, "micro_batch": 1, "accumulation": 1,
                                      "steps": 1000, "seed": 1337, "tokenizer": "byte"}}


@dataclass
class GraphInfo:
    """What check_parity and the benchmark need from `tessel compile --emit=graph`."""

    name: str
    dims: Dict[str, int]
    layers: int
    train: dict
    parallel: dict
    # every graph.param in order: (name, shape, dim names)
    params: List[Tuple[str, Tuple[int, ...], Tuple[str, ...]]]

    def kind(self) -> str:
        """gpt, llama, masks or mixtral, from the parameter names their blocks give."""
        names = {p[0] for p in self.params}
        if any(".mixtral_block." in n for n in names):
            return "mixtral"
        if any(".llama_block." in n for n in names):
            return "llama"
        if any(".gpt_block." in n for n in names):
            return "gpt"
        if any(".masked_block." in n for n in names):
            return "masks"
        return "unknown"


def parse_graph(text: str) -> GraphInfo:
    m = re.search(r"module\s+@([\w$.-]+)\s+attributes\s*(?=\{)", text)
    if not m:
        raise ValueError("no `module @name attributes {...}` in the graph IR")
    attrs = _AttrParser(text, m.end()).parse_dict()
    for key in ("tessel.dims", "tessel.layers", "tessel.train"):
        if key not in attrs:
            raise ValueError(f"the graph IR's module has no {key} attribute")
    for key, defaults in SETTINGS_DEFAULTS.items():
        attrs[key] = {**defaults, **attrs[key]}
    params = []
    param_re = re.compile(r'graph\.param\s+"([^"]+)".*:\s*tensor<((?:\d+x)*)f32,\s*'
                          r'#graph\.dims<([^>]*)>>\s*$')
    for line in text.splitlines():
        if "graph.param" not in line:
            continue
        pm = param_re.search(line)
        if not pm:
            raise ValueError(f"cannot read a graph.param line: {line.strip()}")
        shape = tuple(int(s) for s in pm.group(2).split("x") if s)
        dims = tuple(d.strip() for d in pm.group(3).split(",") if d.strip())
        params.append((pm.group(1), shape, dims))
    return GraphInfo(name=m.group(1), dims={k: int(v) for k, v in attrs["tessel.dims"].items()},
                     layers=int(attrs["tessel.layers"]), train=attrs["tessel.train"],
                     parallel=attrs.get("tessel.parallel", {}), params=params)


def graph_of(tessel: str, model_path: str) -> GraphInfo:
    """Runs `tessel compile MODEL --emit=graph` and parses its output."""
    import subprocess
    proc = subprocess.run([tessel, "compile", model_path, "--emit=graph"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"`{tessel} compile {model_path} --emit=graph` failed "
                           f"(exit {proc.returncode}):\n{proc.stderr}")
    return parse_graph(proc.stdout)
