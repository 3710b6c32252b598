"""The first thing to run on a new GPU machine: is the neural stage correct, repeatable, fast there?

    make gpu-check      # compiles the games, runs this, then the tests marked gpu
    python -m neurd.publication.allocation.device_check --games results/neural \
        --config results/config/neural.json --out results/benchmarks/gpu-check \
        --baseline OLD/src --extra

Each step runs in its own subprocess (XLA reads its flags when the backend
starts), under the flag the neural jobs set (``--xla_gpu_deterministic_ops``):

1. **cycles**: three learning cycles of every game (learned critic; Kuhn and
   Leduc also with the exact critic), 24 configurations (both algorithms, six
   entropy levels, two seeds), once on the CPU and twice on the GPU. Checks:
   every leaf of every state finite on both; the two GPU runs bitwise equal;
   CPU and GPU within :data:`AGREEMENT` (policy tables, max abs difference;
   NashConv of the tables, float64).
2. **end to end**: the real ``neurd neural-run`` at a tiny config on the GPU,
   stopped once by its wall-time budget and resumed.
3. **throughput** per game at N = 480 configurations (the paper's one job per
   game), configuration-iterations per second of ``run_segment`` (checkpoint
   evaluation apart, timed separately), and the projected paper-scale GPU
   time; with ``--baseline SRC`` the same for another source tree (e.g. an
   older revision) in the same call, on the same card (:mod:`.timing`'s workers).

Writes ``report.json`` and ``report.md`` to ``--out`` as it goes (a step that
would overrun ``--deadline`` is skipped and says so) and exits non-zero if a
check failed.  Needs jax (with CUDA), flax, optax, numpy, pandas, pyarrow; not OpenSpiel (the
games come compiled, ``neurd neural-game``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import numpy as np

from neurd import games
from neurd.precision import float64
from neurd.publication.allocation.places import TIMING
from neurd.publication.allocation.timing import SRC, batch, make_spec, worker_env
from neurd.publication.intake import AGREEMENT_NASH_CONV

GAMES = ("kuhn", "leduc", "goofspiel")
EXACT = ("kuhn", "leduc")
# CPU vs GPU after three cycles, float32 networks; the NashConv bound is the one a publication's
# reproduction is held to (neurd.publication)
# its cycles worker (this tree's), as the check and the allocation's device check start it
CYCLES = [sys.executable, "-m", "neurd.publication.allocation.device_check", "cycles"]
AGREEMENT = {"table": 1e-3, "nash_conv": AGREEMENT_NASH_CONV}


# --- workers (one subprocess each) ----------------------------------------------------------


def worker_cycles(args) -> None:
    import jax

    from neurd.neural import train

    arrays = {"platform": np.array(jax.devices()[0].platform)}
    for name in args.game:
        compiled = games.load(Path(args.games) / name / "game.npz")
        game = train.neural_game(compiled)
        for critic in ("learned", "exact") if name in EXACT else ("learned",):
            if args.critic and critic != args.critic:
                continue
            spec = make_spec(args.precision, critic, args.variant)
            states, keys, etas = batch(2, name, spec, game)
            out = train.run_segment(spec, game, states, keys, etas, 0, args.cycles,
                                    np.float32(1.0))
            for a in spec.algorithms:
                for i, leaf in enumerate(jax.tree_util.tree_leaves(out[a])):
                    arrays[f"{name}/{critic}/{a}/{i}"] = np.asarray(leaf)
    np.savez(args.out, **arrays)


# --- the orchestrator -----------------------------------------------------------------------


class Check:
    def __init__(self, out: Path, deadline: float):
        self.out, self.deadline, self.start = out, deadline, time.monotonic()
        self.report = {"steps": [], "checks": [], "throughput": []}
        out.mkdir(parents=True, exist_ok=True)

    def left(self) -> float:
        return self.deadline - (time.monotonic() - self.start)

    def run(self, what: str, command: list[str], env: dict, needs: float, timeout=None):
        """A subprocess step; skipped when less than ``needs`` seconds are left."""
        if self.left() < needs:
            self.report["steps"].append({"step": what, "skipped": f"{self.left():.0f} s left"})
            self.save()
            return None
        start = time.monotonic()
        done = subprocess.run(command, env=env, capture_output=True, text=True,
                              timeout=min(timeout or 1e9, max(self.left(), 1.0)))
        seconds = round(time.monotonic() - start, 1)
        self.report["steps"].append({"step": what, "seconds": seconds,
                                     "returncode": done.returncode})
        log = self.out / "steps.log"
        with open(log, "a") as handle:
            handle.write(f"=== {what} ({seconds} s, rc {done.returncode})\n{done.stdout[-4000:]}"
                         f"\n{done.stderr[-8000:]}\n")
        print(f"{what}: rc {done.returncode} in {seconds} s", flush=True)
        self.save()
        return done

    def check(self, name: str, ok: bool, measured) -> None:
        self.report["checks"].append({"check": name, "ok": bool(ok), "measured": measured})
        print(f"[{'ok' if ok else 'FAIL'}] {name}: {measured}", flush=True)
        self.save()

    def save(self) -> None:
        (self.out / "report.json").write_text(json.dumps(self.report, indent=1))
        lines = ["# GPU check", ""]
        info = self.report.get("device")
        if info:
            lines += [f"Device: {info}", ""]
        lines += ["| check | ok | measured |", "| --- | --- | --- |"]
        lines += [f"| {c['check']} | {'yes' if c['ok'] else 'NO'} | {c['measured']} |"
                  for c in self.report["checks"]]
        if self.report["throughput"]:
            lines += ["", "| code | precision | flag | game | N | ms/cycle | config-it/s | "
                      "checkpoint s | paper-scale min |", "| --- " * 9 + "|"]
            lines += [f"| {r['code']} | {r['precision']} | {r['flag']} | {r['game']} | "
                      f"{r['configurations']} | {r['ms_per_cycle']} | "
                      f"{r['configuration_iterations_per_second']:,} | "
                      f"{r.get('checkpoint_seconds', '-')} | {r['paper_scale_minutes']} |"
                      for r in self.report["throughput"]]
        lines += ["", "Steps: " + "; ".join(
            f"{s['step']} {s.get('seconds', s.get('skipped'))}" for s in self.report["steps"])]
        (self.out / "report.md").write_text("\n".join(lines) + "\n")


def describe_device(env: dict) -> tuple[subprocess.CompletedProcess, str]:
    """JAX's view of the first device in a process of ``env`` (stdout ``version | platform |
    device kind``, or the error), and nvidia-smi's name, driver and memory ('' without it)."""
    info = subprocess.run([sys.executable, "-c", "import jax; d = jax.devices()[0]; "
                           "print(jax.__version__, '|', d.platform, '|', d.device_kind)"],
                          env=env, capture_output=True, text=True)
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True).stdout
    except OSError:
        smi = ""
    return info, smi.strip()


def compare_cycles(check: Check, cpu_file: Path, gpu_files: list[Path], games_dir: Path) -> None:

    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp

    from neurd.neural.measurement import exact_policies, exact_setup
    from neurd.tabular.evaluation import nash_conv

    cpu = np.load(cpu_file)
    gpus = [np.load(f) for f in gpu_files]
    keys = [k for k in cpu.files if "/" in k]
    finite = {str(d["platform"]): all(np.all(np.isfinite(d[k])) for k in keys)
              for d in [cpu] + gpus}
    check.check("every leaf finite after 3 cycles (CPU, GPU)", all(finite.values()), finite)
    if len(gpus) == 2:
        same = [k for k in keys if not np.array_equal(gpus[0][k], gpus[1][k])]
        check.check("two GPU runs bitwise equal", not same,
                    "all leaves equal" if not same else f"{len(same)} leaves differ: {same[:3]}")
    else:
        check.check("two GPU runs bitwise equal", False, "only one GPU run finished")
    gpu = gpus[0]
    table_diff, value_diff = {}, {}
    for name in sorted({k.split("/")[0] for k in keys}):
        compiled = games.load(games_dir / name / "game.npz")
        form, _ = exact_setup(compiled)
        legal = jnp.asarray(compiled.infostate_legal)
        for key in keys:
            g, critic, algorithm, leaf = key.split("/")
            if g != name or cpu[key].ndim != 3 or cpu[key].shape[1:] != legal.shape:
                continue  # the policy table is the leaf shaped [N, I, A]
            label = f"{name}/{critic}/{algorithm}"
            table_diff[label] = float(np.max(np.abs(cpu[key] - gpu[key])))
            evaluate = jax.jit(jax.vmap(partial(nash_conv, form)))
            with float64():
                values = [np.asarray(evaluate(exact_policies(jnp.asarray(d[key]), legal)))
                          for d in (cpu, gpu)]
            value_diff[label] = float(np.max(np.abs(values[0] - values[1])))
    check.check(f"CPU vs GPU policy tables within {AGREEMENT['table']}",
                max(table_diff.values()) <= AGREEMENT["table"],
                {k: f"{v:.2e}" for k, v in table_diff.items()})
    check.check(f"CPU vs GPU NashConv within {AGREEMENT['nash_conv']}",
                max(value_diff.values()) <= AGREEMENT["nash_conv"],
                {k: f"{v:.2e}" for k, v in value_diff.items()})


def tiny_config(snapshot: Path, out: Path) -> Path:
    """The neural section snapshot ``snapshot`` cut to a tiny Kuhn job (the end-to-end step)."""
    cfg = json.loads(snapshot.read_text())
    cfg.update({"games": ["kuhn"], "entropies": [0.0, 0.1], "seeds": 2, "seeds_per_job": 2,
                "seeds_per_batch": 2, "phase_iterations": {"kuhn": 200}, "exact_critic_games": [],
                "checkpoints": {"geometric": 4, "linear": 5},
                "final_checkpoints": min(int(cfg.get("final_checkpoints", 3)), 5)})
    path = out / "tiny_neural.json"
    path.write_text(json.dumps(cfg, sort_keys=True))
    return path


def end_to_end(check: Check, snapshot: Path, games_dir: Path, platform: str) -> None:
    work = check.out / "e2e"
    work.mkdir(exist_ok=True)
    config = tiny_config(snapshot, check.out)
    command = [sys.executable, "-m", "neurd.cli", "neural-run", "--config", str(config),
               "--game", "kuhn", "--critic", "learned", "--chunk", "0",
               "--compiled", str(games_dir / "kuhn" / "game.npz"),
               "--curves", str(work / "curves.parquet"),
               "--policies", str(work / "policies.parquet"),
               "--checkpoint", str(work / "checkpoint")]
    first = check.run("neural-run, budget 0.05 min (stops)", command
                      + ["--stop-after-minutes", "0.05"], worker_env(platform), needs=60)
    if first is None:
        return
    second = check.run("neural-run, resumed", command, worker_env(platform), needs=40)
    ok = (first.returncode == 75 and second is not None and second.returncode == 0
          and (work / "curves.parquet").exists() and not (work / "checkpoint").exists())
    check.check("neurd neural-run end to end on the GPU (stopped, resumed)", ok,
                f"first rc {first.returncode}, then rc "
                f"{None if second is None else second.returncode}")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="mode")
    p = sub.add_parser("cycles")
    p.add_argument("--games", required=True)
    p.add_argument("--cycles", type=int, default=3)
    p.add_argument("--precision", default="float32")
    p.add_argument("--game", nargs="+", default=list(GAMES))
    p.add_argument("--critic", default=None, choices=("learned", "exact"),
                   help="only this critic (default: each game's)")
    p.add_argument("--variant", default="default",
                   help="the cycle variant (neurd.neural.variants; its XLA flags come with the "
                        "environment)")
    p.add_argument("--out", required=True)
    parser.add_argument("--games", default="results/neural",
                        help="folder of compiled games: <game>/game.npz")
    parser.add_argument("--config", default=None,
                        help="the neural config snapshot (results/config/neural.json), cut to a "
                             "tiny job for the end-to-end step")
    parser.add_argument("--out", default="gpu-check")
    parser.add_argument("--baseline", default=None, help="another src/ tree to time beside")
    parser.add_argument("--deadline", type=float, default=540.0, help="seconds for everything")
    parser.add_argument("--platform", default="cuda",
                        help="the JAX platform checked (cpu: a dry run of the check itself)")
    parser.add_argument("--configs", type=int, default=480, help="configurations timed")
    parser.add_argument("--game", nargs="+", default=list(GAMES), help="games checked")
    parser.add_argument("--no-throughput", action="store_true", help="skip the timing")
    parser.add_argument("--extra", action="store_true",
                        help="also time tensorfloat32 and no deterministic flag")
    return parser


def cycles(check: Check, args) -> None:
    """Step 1: the cycles on the CPU and twice on the device, compared."""
    out, games_dir, chosen = check.out, Path(args.games), ["--game", *args.game]
    files = {"cpu": out / "cycles_cpu.npz", "gpu": [out / "cycles_gpu_a.npz",
                                                   out / "cycles_gpu_b.npz"]}
    cpu = check.run("cycles on the CPU", CYCLES + ["--games", str(games_dir), "--out",
                                                  str(files["cpu"]), *chosen],
                    worker_env("cpu"), needs=30)
    gpu = [check.run(f"cycles on the GPU ({k})", CYCLES + ["--games", str(games_dir),
                                                         "--out", str(f), *chosen],
                     worker_env(args.platform), needs=30)
           for k, f in zip("ab", files["gpu"])]
    done = [f for f, r in zip(files["gpu"], gpu) if r is not None and r.returncode == 0]
    if cpu is not None and cpu.returncode == 0 and done:
        compare_cycles(check, files["cpu"], done, games_dir)
    else:
        check.check("cycles ran on CPU and GPU", False, "see steps.log")


def throughput(check: Check, args, code: str, src: Path, precision: str, flag: bool,
               measure: bool, needs: float) -> None:
    """Step 3 for one source tree, precision and flag: a throughput worker's rows, kept in
    the report."""
    file = check.out / f"throughput_{code}_{precision}_{int(flag)}.json"
    command = [sys.executable, str(TIMING), "throughput", "--games", str(Path(args.games)),
               "--precision", precision,
                       "--configs", str(args.configs), "--out", str(file),
                       "--game", *args.game] + (["--measure"] if measure else [])
    done = check.run(f"throughput {code} {precision} flag={flag}", command,
                     worker_env(args.platform, flag, src), needs=needs)
    if done is not None and done.returncode == 0:
        for row in json.loads(file.read_text()):
            check.report["throughput"].append(
                {"code": code, "precision": precision, "flag": flag, **row})
        check.save()


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.mode == "cycles":
        return worker_cycles(args) or 0

    check = Check(Path(args.out), args.deadline)
    info, smi = describe_device(worker_env(args.platform))
    check.report["device"] = f"{info.stdout.strip()} | {smi or 'no nvidia-smi'}"
    check.save()
    if args.platform != "cpu" and "gpu" not in info.stdout:
        check.check("a GPU is visible to JAX", False, info.stdout + info.stderr[-500:])
        return 1
    cycles(check, args)
    if not args.no_throughput:
        throughput(check, args, "this", SRC, "float32", True, True, needs=60)
    if args.baseline:
        # an older tree without neural.matmul_precision runs at XLA's default (its row says so)
        throughput(check, args, "baseline", Path(args.baseline), "float32", True, False,
                   needs=60)
    if args.config:
        end_to_end(check, Path(args.config), Path(args.games), args.platform)
    if args.extra:
        throughput(check, args, "this", SRC, "tensorfloat32", True, False, needs=60)
        throughput(check, args, "this", SRC, "float32", False, False, needs=60)
    ours = [r for r in check.report["throughput"] if r["code"] == "this"
            and r["precision"] == "float32" and r["flag"]]
    if ours:
        check.check("throughput rows finite", all(r["finite"] for r in ours),
                    {r["game"]: r["paper_scale_minutes"] for r in ours})
        check.report["paper_scale_minutes"] = round(sum(r["paper_scale_minutes"]
                                                        for r in ours), 1)
        check.save()
    return 0 if all(c["ok"] for c in check.report["checks"]) else 1


if __name__ == "__main__":
    sys.exit(main())
