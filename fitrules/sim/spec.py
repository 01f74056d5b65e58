"""Grid specs: TOML files naming the factors, their levels, fixed settings and seeds.

A spec is a list of blocks whose runs are united; each block is the Cartesian product of its
factors, on top of its own and the spec's fixed settings::

    name = "main"
    seeds = [0, 1, 2]
    [fixed]
    M = 4
    [[block]]
    [block.factors]
    H = [1, 4, 16, 64]
    keep = [1.0, 0.5]

A block may carry its own ``seeds`` list (a designed batch gives each cell its own count).

``model = "quadratic"`` (at the top level or in ``[fixed]``) makes every run a run of the
noisy-quadratic backend, :class:`fitrules.sim.quadratic.QuadConfig`, whose fields are then the
settings a spec may name; ``model = "gpt"`` the PyTorch transformer's,
:class:`fitrules.sim.gpt.GPTConfig` (needs the ``gpt`` extra); the default, ``model = "mlp"``,
is the MLP harness (:class:`fitrules.sim.diloco.RunConfig`). One spec runs one model.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from fitrules.base.errors import SimError, param
from fitrules.base.limits import MAX_SEED, MAX_SIM_RUNS, check_memory
from fitrules.sim.diloco import RunConfig
from fitrules.sim.gpt import PRESET_SETTINGS, GPTConfig, require_torch
from fitrules.sim.quadratic import QuadConfig

CONFIG_FIELDS = {f.name: f.type for f in fields(RunConfig)}
QUAD_FIELDS = {f.name: f.type for f in fields(QuadConfig)}
GPT_FIELDS = {f.name: f.type for f in fields(GPTConfig)}
MODELS = {
    "mlp": (RunConfig, CONFIG_FIELDS),
    "quadratic": (QuadConfig, QUAD_FIELDS),
    "gpt": (GPTConfig, GPT_FIELDS),
}
# what to reduce when a run of a backend would not fit in memory
MEMORY_HINTS = {QuadConfig: "use a smaller dim or M",
                GPTConfig: "use a smaller model, context, batch or M"}  # fmt: skip


@dataclass(frozen=True)
class GridSpec:
    """A parsed spec: its name, source text and the runs it asks for, in a fixed order."""

    name: str
    text: str
    runs: tuple[RunConfig, ...]

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def _check_keys(where: str, mapping: dict, source: str, known: dict = CONFIG_FIELDS) -> None:
    for key in mapping:
        if key == "model":
            raise SimError(
                f"{source}: 'model' in {where}: a spec runs one model, named once at the top "
                'level or in [fixed] (model = "quadratic")'
            )
        if key not in known or key == "seed":
            allowed = ", ".join(k for k in known if k not in ("seed", "model"))
            raise SimError(
                f"{source}: unknown factor {key!r} in {where}; allowed: {allowed}"
                " (seeds go in 'seeds')"
            )


def _config(values: dict, source: str, cls: type = RunConfig) -> Any:
    kinds = {"int": int, "float": float, "bool": bool, "str": str}
    known = {f.name: f.type for f in fields(cls)}
    coerced: dict[str, Any] = {}
    for key, value in values.items():
        kind = kinds[str(known[key])]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            try:
                value = float(value)
            except OverflowError:
                raise SimError(f"{source}: {key}={value} is beyond double precision") from None
        if kind is int and isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise SimError(f"{source}: {key}={value!r} must be of type {kind.__name__}")
        coerced[key] = value
    if cls is GPTConfig:  # a preset's model sizes, for those not given
        coerced = GPTConfig.with_preset(coerced)
    try:
        return cls(**coerced).validate()
    except SimError as err:
        raise SimError(f"{source}: {err}") from None


def _table(value: object, where: str, source: str) -> dict:
    if not isinstance(value, dict):
        raise SimError(
            f"{source}: {where} must be a table of NAME = VALUE, e.g. [fixed] then M = 4; got "
            f"{value!r}"
        )
    return value


def _seeds(value: object, where: str) -> list[int]:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in value)
        or not all(0 <= s <= MAX_SEED for s in value)
    ):
        raise SimError(
            f"{where}: seeds={value!r} must be a non-empty list of integers from 0 to 2**63 - 1"
        )
    if len(set(value)) != len(value):
        raise SimError(f"{where}: seeds={value!r} lists a seed twice")
    return list(value)


def check_runs(runs: tuple[RunConfig, ...], source: str) -> None:
    """Refuse a spec whose single run would not fit in memory, or needs PyTorch where it is
    missing (checked before any run)."""
    from fitrules.sim.corpus import ALPHABET

    if runs and isinstance(runs[0], GPTConfig):
        require_torch()
    if runs and type(runs[0]) in MEMORY_HINTS:
        worst = max(runs, key=lambda r: r.memory())
        check_memory(worst.memory(), f"{source}: {worst.describe()}", MEMORY_HINTS[type(worst)])
    elif runs:
        worst = max(runs, key=lambda r: r.memory(len(ALPHABET)))
        check_memory(
            worst.memory(len(ALPHABET)),
            f"{source}: a run at width={worst.width}, M={worst.M}, batch={worst.batch}, "
            f"embed={worst.embed}, context={worst.context}",
            "use a smaller model or batch",
        )


def parse_spec(text: str, source: str = "<spec>") -> GridSpec:
    """Parse spec text into a :class:`GridSpec`, validating every run before any is made.

    Raises
    ------
    SimError
        For a key, table or value of the wrong kind, a setting outside its range, a run
        asked for twice, more than :data:`~fitrules.base.limits.MAX_SIM_RUNS` runs, or a run that
        would not fit in memory.
    """
    from fitrules.base.inputs import parse_toml

    doc = parse_toml(text, source, SimError)
    unknown = set(doc) - {"name", "description", "model", "seeds", "fixed", "block"}
    if unknown:
        raise SimError(
            f"{source}: unknown top-level key(s) {sorted(unknown)}; allowed: name, "
            "description, model, seeds, fixed, block"
        )
    for key in ("name", "description"):
        if key in doc and not isinstance(doc[key], str):
            raise SimError(f"{source}: {key} must be a string")
    seeds = _seeds(doc.get("seeds", [0]), source)
    fixed = dict(_table(doc.get("fixed", {}), "[fixed]", source))
    cls, known = _model(doc, fixed, source)
    _check_keys("[fixed]", fixed, source, known)
    blocks = doc.get("block", [{}])
    if not isinstance(blocks, list) or not all(isinstance(b, dict) for b in blocks):
        raise SimError(
            f"{source}: 'block' must be an array of tables, written [[block]] (not [block])"
        )
    plan = []
    total = 0
    for i, block in enumerate(blocks):
        extra = set(block) - {"fixed", "factors", "seeds"}
        if extra:
            raise SimError(
                f"{source}: block {i + 1} has unknown key(s) {sorted(extra)}; allowed: fixed, "
                "factors, seeds"
            )
        block_seeds = _seeds(block["seeds"], source) if "seeds" in block else seeds
        bfixed = _table(block.get("fixed", {}), f"block {i + 1} [fixed]", source)
        factors = _table(block.get("factors", {}), f"block {i + 1} [factors]", source)
        _check_keys(f"block {i + 1} [fixed]", bfixed, source, known)
        _check_keys(f"block {i + 1} [factors]", factors, source, known)
        for name, levels in factors.items():
            if not isinstance(levels, list) or not levels:
                raise SimError(f"{source}: factor {name!r} needs a non-empty list of levels")
        count = len(block_seeds)
        for levels in factors.values():
            count *= len(levels)
        total += count
        if total > MAX_SIM_RUNS:  # counted before any run is made
            raise SimError(
                f"{source}: asks for more than {MAX_SIM_RUNS:,} runs; split it into smaller specs"
            )
        plan.append((bfixed, factors, block_seeds))
    runs: list[RunConfig] = []
    for bfixed, factors, block_seeds in plan:
        names = list(factors)
        for combo in itertools.product(*(factors[n] for n in names)):
            for seed in block_seeds:
                values = {**fixed, **bfixed, **dict(zip(names, combo, strict=True)), "seed": seed}
                runs.append(_config(values, source, cls))
    if len(set(runs)) != len(runs):
        raise SimError(f"{source}: the blocks ask for the same run twice")
    check_runs(tuple(runs), source)
    return GridSpec(str(doc.get("name", Path(source).stem)), text, tuple(runs))


def _model(doc: dict, fixed: dict, source: str) -> tuple[type, dict]:
    """The spec's config class and fields, from ``model`` (popped from ``fixed``)."""
    names = [doc["model"]] if "model" in doc else []
    if "model" in fixed:
        names.append(fixed.pop("model"))
    if len(names) == 2 and names[0] != names[1]:
        raise SimError(f"{source}: model is {names[0]!r} at the top level but {names[1]!r} in "
                       "[fixed]; name it once")  # fmt: skip
    model = names[0] if names else "mlp"
    if not isinstance(model, str) or model not in MODELS:
        raise SimError(f"{source}: model={model!r} is unknown; allowed: {', '.join(MODELS)}")
    return MODELS[model]


def load_spec(path: Path | str) -> GridSpec:
    """Read a spec file, or a committed spec by name (``main`` is ``data/specs/main.toml``).

    A file that exists is read; otherwise a bare name is looked up among the committed specs,
    which an installed package carries too.
    """
    from fitrules.base.paths import data_dir, shipped_spec

    path = Path(path)
    if not path.exists():
        shipped = shipped_spec(str(path))
        if shipped is None:
            names = sorted(p.stem for p in (data_dir() / "specs").glob("*.toml"))
            raise SimError(
                f"{path}: spec file not found (committed specs, usable by name: "
                f"{', '.join(names) or 'none'})"
            )
        return parse_spec(shipped.read_text(), f"data/specs/{shipped.name}")
    if path.is_dir():
        raise SimError(f"{path}: is a directory, not a spec file")
    from fitrules.base.inputs import read_text

    return parse_spec(read_text(path, str(path), SimError), str(path))


def parse_cell(
    cell: str, base: dict | None = None, source: str = param("cell"), known: dict = CONFIG_FIELDS
) -> dict:
    """Parse ``"H=8,keep=0.25"`` into config values on top of ``base``; ``known`` maps the
    settings allowed to their types (the MLP harness's by default)."""
    values = dict(base or {})
    seen: set[str] = set()
    for part in filter(None, (p.strip() for p in cell.split(","))):
        if "=" not in part:
            raise SimError(f"{source}: {part!r} is not of the form NAME=VALUE")
        key, raw = (s.strip() for s in part.split("=", 1))
        _check_keys(source, {key: None}, source, known)
        if key in seen:
            raise SimError(f"{source}: {key!r} is given twice")
        seen.add(key)
        kind = str(known[key])
        try:
            if kind in ("int", "float") and not raw.isascii():
                raise ValueError  # Python's int() and float() read fullwidth digits too
            if kind == "bool":
                if raw.lower() not in ("true", "false"):
                    raise ValueError
                value: object = raw.lower() == "true"
            else:
                value = {"int": int, "float": float, "str": str}[kind](raw)
        except ValueError:
            raise SimError(f"{source}: {key}={raw!r} is not a valid {kind}") from None
        values[key] = value
    if not seen:
        raise SimError(f"{source} {cell!r}: names no setting; give NAME=VALUE pairs, e.g. H=8")
    return values


def _seed_items(seeds: str) -> list[int]:
    """``--seeds 0,1,2`` as integers; an empty item (``0,1,2,``) or a digit that is not ASCII
    (``１``) is refused, not skipped or read. An empty text gives no seed (refused by the
    caller with the other seed lists)."""
    if not seeds.strip():
        return []
    items = [s.strip() for s in seeds.split(",")]
    if any(not s for s in items):
        raise SimError(
            f"{param('seeds')} {seeds!r}: an empty seed between commas; give integers separated by "
            "commas, e.g. 0,1,2"
        )
    if not all(re.fullmatch(r"[+-]?[0-9]+", s) for s in items):
        raise SimError(f"{param('seeds')} {seeds!r}: expected integers (0-9) separated by commas")
    return [int(s) for s in items]


def cell_spec(cell: str, base: GridSpec | None = None, seeds: str | None = None) -> GridSpec:
    """A one-configuration spec from ``--cell``, on top of ``base``'s fixed settings.

    The base's first run supplies the settings the cell does not name (the spec's fixed
    values and its factors' first levels); seeds default to the base's seeds, or 0.
    """
    base_values: dict = {}
    seed_list = [0]
    cell, cls, known = _cell_model(cell, base)
    if base is not None:
        first = base.runs[0]
        base_values = {k: getattr(first, k) for k in known if k not in ("seed", "model")}
        seed_list = sorted({r.seed for r in base.runs})
    if seeds is not None:
        seed_list = _seeds(_seed_items(seeds), f"{param('seeds')} {seeds!r}")
        if len(seed_list) > MAX_SIM_RUNS:
            raise SimError(f"{param('seeds')}: more than {MAX_SIM_RUNS:,} seeds")
    only_model = cls is not RunConfig and not cell.replace(",", "").strip()
    named = {} if only_model else parse_cell(cell, known=known)
    if "preset" in named:  # the preset's sizes replace the base's, unless the cell names them
        base_values = {k: v for k, v in base_values.items() if k not in PRESET_SETTINGS}
    values = {**base_values, **named}
    runs = tuple(_config({**values, "seed": s}, param("cell"), cls) for s in seed_list)
    check_runs(runs, param("cell"))
    desc = ",".join(f"{k}={v}" for k, v in named.items())
    if cls is not RunConfig:
        desc = ",".join(filter(None, [f"model={runs[0].model}", desc]))
        values = {**values, "model": runs[0].model}
    # flag words: a spec file's comment
    text = f"# --cell {desc}\n" + "\n".join(f"{k} = {v!r}" for k, v in sorted(values.items()))
    return GridSpec(f"cell:{desc}", text + f"\nseeds = {seed_list!r}\n", runs)


def _cell_model(cell: str, base: GridSpec | None) -> tuple[str, type, dict]:
    """The cell without its ``model=NAME`` part, and the config class and fields it names
    (the base spec's, or the MLP harness's, when it names none)."""
    parts = [p for p in cell.split(",") if p.split("=", 1)[0].strip() != "model"]
    named = [p.split("=", 1)[1].strip() for p in cell.split(",")
             if p.split("=", 1)[0].strip() == "model" and "=" in p]  # fmt: skip
    base_cls = type(base.runs[0]) if base is not None else None
    if not named:
        cls = base_cls or RunConfig
        return cell, cls, {f.name: f.type for f in fields(cls)}
    if len(named) > 1:
        raise SimError(f"{param('cell')}: 'model' is given twice")
    if named[0] not in MODELS:
        raise SimError(
            f"{param('cell')}: model={named[0]!r} is unknown; allowed: {', '.join(MODELS)}"
        )
    cls, known = MODELS[named[0]]
    if base_cls is not None and cls is not base_cls:
        raise SimError(f"{param('cell')} model={named[0]}: the spec given runs another model")
    return ",".join(parts), cls, known
