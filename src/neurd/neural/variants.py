"""A learning cycle's variants: the same learning, its program laid out or compiled otherwise.

A variant changes how the cycle's arithmetic is laid out and compiled, never
what it computes: its numbers move by float rounding only, as another device's
do.  It is a run-time choice of ``neurd neural-run --variant`` (not a config
key, so not in the config's hash); every piece of compute records the variant it
ran, and a block's provenance lists them.  A GPU allocation times the variants
on its card, checks each as it checks the device (every leaf finite, two runs
bitwise equal, within the bound of the CPU), and runs its jobs with the fastest
that passes (:func:`choose`).

The knobs, each with its default first:

* ``layout``: the passes over every information state
  (:mod:`neurd.neural.layouts`);
* ``unroll``: the cycle loop unrolled by 1, 4 or 16 cycles;
* ``command_buffers``: XLA's command buffers (CUDA graphs) as XLA's defaults
  have them, off, or with while loops and conditionals included (GPU only);
* ``products``: the config's matmul precision, or TensorFloat-32 (GPU only).

A variant's name is its knobs joined by dots, e.g. ``vmap_used.u4.cb-while.f32``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

UNROLLS = (1, 4, 16)
COMMAND_BUFFERS = {
    "default": None,  # XLA's own default: no flag
    "off": "",
    "while": "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,WHILE,CONDITIONAL",
}
PRODUCTS = {"f32": None, "tf32": "tensorfloat32"}  # None: the config's matmul precision
FLAG = "--xla_gpu_enable_command_buffer"


def _layouts() -> tuple[str, ...]:
    from neurd.neural import layouts  # puts off JAX

    return layouts.names()


@dataclass(frozen=True)
class Variant:
    """The knobs of a cycle's program (see the module); ``layout`` None: the default."""

    layout: str | None = None
    unroll: int = 1
    command_buffers: str = "default"
    products: str = "f32"

    def __post_init__(self):
        if self.layout is None:
            object.__setattr__(self, "layout", _layouts()[0])
        allowed = {"layout": _layouts(), "unroll": UNROLLS,
                   "command_buffers": tuple(COMMAND_BUFFERS), "products": tuple(PRODUCTS)}
        problems = [f"{knob} {getattr(self, knob)!r} (one of {list(values)})"
                    for knob, values in allowed.items() if getattr(self, knob) not in values]
        if problems:
            raise ValueError("not a cycle variant: " + "; ".join(problems))

    @property
    def name(self) -> str:
        return f"{self.layout}.u{self.unroll}.cb-{self.command_buffers}.{self.products}"


DEFAULT_NAME = "default"


def parse(name: str) -> Variant:
    """The variant named ``name`` (``default``: every knob at its default); ValueError naming
    what is wrong."""
    if name == DEFAULT_NAME:
        return Variant()
    parts = str(name).split(".")
    if (len(parts) != 4 or not parts[1].startswith("u") or not parts[1][1:].isdigit()
            or not parts[2].startswith("cb-")):
        raise ValueError(f"{name!r} is not a cycle variant's name (<layout>.u<unroll>."
                         f"cb-<command buffers>.<products>, e.g. {Variant().name}, or "
                         f"{DEFAULT_NAME!r})")
    return Variant(parts[0], int(parts[1][1:]), parts[2][3:], parts[3])


def apply(spec, variant: Variant):
    """``spec`` (a :class:`neurd.neural.train.Spec`) run as ``variant``."""
    fields = {f.name for f in dataclasses.fields(spec)}
    changes = {k: v for k, v in (("layout", variant.layout),
                                 ("unroll", variant.unroll)) if k in fields}
    if PRODUCTS[variant.products] is not None:
        changes["precision"] = PRODUCTS[variant.products]
    return dataclasses.replace(spec, **changes)


def xla_flags(variant: Variant, flags: str = "") -> str:
    """``flags`` (XLA_FLAGS) with the variant's command-buffer flag in place of any there."""
    kept = [f for f in flags.split() if not f.startswith(FLAG + "=")]
    value = COMMAND_BUFFERS[variant.command_buffers]
    return " ".join(kept + ([] if value is None else [f"{FLAG}={value}"]))


def candidates(gpu: bool = True) -> list[Variant]:
    """The variants an allocation times: the default, then each knob changed alone (the GPU
    knobs only on a GPU).  Combinations of changed knobs are not among them."""
    base = Variant()
    out = [base]
    out += [dataclasses.replace(base, layout=x) for x in _layouts()[1:]]
    out += [dataclasses.replace(base, unroll=x) for x in UNROLLS[1:]]
    if gpu:
        out += [dataclasses.replace(base, command_buffers=x) for x in list(COMMAND_BUFFERS)[1:]]
        out += [dataclasses.replace(base, products=x) for x in list(PRODUCTS)[1:]]
    return out


def choose(passed: Mapping[str, bool], ms: Mapping[str, float]) -> str:
    """The fastest variant (least ``ms`` per cycle) among those that ``passed`` the check;
    the default's name if none passed or was timed.  A variant that failed the check, or was
    not checked, is never chosen, however fast."""
    timed = [(float(ms[name]), name) for name in ms
             if passed.get(name) is True and ms[name] is not None and float(ms[name]) > 0]
    return min(timed)[1] if timed else Variant().name


def resolved_name(variant: Variant, visited_share: float | None = None) -> str:
    """The name of the variant a program actually runs: ``variant``'s, its layout ``auto``
    resolved for the default backend and the game (:func:`neurd.neural.layouts.resolve`:
    ``visited_share`` is the game's, :func:`neurd.neural.visited.visited_share`; this starts
    JAX's backend, so XLA_FLAGS must be set first).  What every piece of compute records."""
    from neurd.neural import layouts

    return dataclasses.replace(variant,
                               layout=layouts.resolve(variant.layout, visited_share)).name
