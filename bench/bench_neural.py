"""Side-by-side benchmark of the neural stage against OpenSpiel, one process, interleaved.

Per game:

* **sampling**: whole episodes per second under the same tabular policy, ours
  (:func:`neurd.neural.sampler.sample`, jitted, a batch at a time) against
  OpenSpiel's ``rl_environment.Environment`` stepped from Python with the
  policy looked up by information-state string;
* **NashConv of a network policy**: ours (the network evaluated on every
  information state at once, renormalised in float64, the engine's exact
  NashConv) against ``pyspiel.nash_conv`` of the same policy as a prebuilt
  ``pyspiel.TabularPolicy`` (the network evaluation not counted for OpenSpiel);
* **learning**: configuration-iterations per second of the whole learning loop
  (:func:`neurd.neural.train.run_segment`), one configuration and a batch.

From these: the paper-scale wall time of Fig 6 on this machine, and a FLOP
count of the paper-scale program for a GPU estimate.

    python bench/bench_neural.py                  # writes bench/NEURAL.md
    python bench/bench_neural.py --games kuhn --rounds 2 --out /tmp/neural.md
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

import bench_cycle  # bench/bench_cycle.py, beside this script
import jax
import jax.numpy as jnp
import numpy as np
import pyspiel
from _machine import describe  # bench/_machine.py, beside this script
from open_spiel.python import rl_environment

from neurd import engine, games
from neurd.names import GAMES
from neurd.neural import measurement, sampler, train
from neurd.precision import float64
from neurd.tabular.histories import history_tree
from neurd.tabular.policies import to_openspiel

PAPER = {"phase_iterations": 330_000, "phases": 3, "seeds": 40, "algorithms": 2, "entropies": 6}


def _median_rate(function, count: int, rounds: int) -> float:
    rates = []
    for _ in range(rounds):
        start = time.perf_counter()
        jax.block_until_ready(function())
        rates.append(count / (time.perf_counter() - start))
    return statistics.median(rates)


def bench_sampling(compiled, policy, rounds: int, batch: int, their_seconds: float) -> dict:
    tree = history_tree(compiled, jnp.float32)
    table = jnp.asarray(policy, jnp.float32)
    draw = jax.jit(lambda key: sampler.sample(tree, table, key, batch))
    jax.block_until_ready(draw(jax.random.PRNGKey(0)))
    keys = iter(jax.random.split(jax.random.PRNGKey(1), 10 * rounds))
    lookup = to_openspiel(compiled, policy)
    env = rl_environment.Environment(pyspiel.load_game(compiled.game_string))
    rng = np.random.default_rng(0)

    def theirs(episodes):
        for _ in range(episodes):
            step = env.reset()
            while not step.last():
                player = step.observations["current_player"]
                key = env.get_state.information_state_string(player)
                actions, probs = zip(*lookup[key])
                step = env.step([actions[rng.choice(len(actions), p=probs)]])

    start = time.perf_counter()
    theirs(20)
    episodes = max(20, int(their_seconds * 20 / (time.perf_counter() - start)))
    ours_rates, their_rates = [], []
    for _ in range(rounds):
        ours_rates.append(_median_rate(lambda: draw(next(keys)), batch, 1))
        start = time.perf_counter()
        theirs(episodes)
        their_rates.append(episodes / (time.perf_counter() - start))
    ours, theirs_rate = statistics.median(ours_rates), statistics.median(their_rates)
    return dict(ours=ours, theirs=theirs_rate, speedup=ours / theirs_rate)


def bench_nash_conv(compiled, rounds: int, batch: int) -> dict:
    """Ours: policy networks -> every information state's policy -> exact NashConv (float64)."""
    spec = train.Spec()
    states = train.initial_states(spec, train.neural_game(compiled), 0, "bench",
                                  tuple(range(batch)), 1)
    one = jax.tree_util.tree_map(lambda x: x[:1], states.policy)
    openspiel_game = pyspiel.load_game(compiled.game_string)
    form, _ = measurement.exact_setup(compiled)
    legal = jnp.asarray(compiled.infostate_legal)

    def ours(params):
        with float64():
            return measurement.network_nash_conv(spec, form, compiled.infostate_tensor, legal,
                                                params)

    ours(one), ours(states.policy)  # compile both shapes
    values, policies = ours(one)
    tabular = pyspiel.TabularPolicy(to_openspiel(compiled, np.asarray(policies)[0]))
    assert abs(float(values[0]) - pyspiel.nash_conv(openspiel_game, tabular)) < 1e-9
    start = time.perf_counter()
    pyspiel.nash_conv(openspiel_game, tabular)
    their_calls = max(2, int(0.3 / (time.perf_counter() - start)))
    single, batched, theirs = [], [], []
    for _ in range(rounds):
        single.append(_median_rate(lambda: ours(one), 1, 20))
        batched.append(_median_rate(lambda: ours(states.policy), batch, 1))
        start = time.perf_counter()
        for _ in range(their_calls):
            pyspiel.nash_conv(openspiel_game, tabular)
        theirs.append(their_calls / (time.perf_counter() - start))
    s, b, t = map(statistics.median, (single, batched, theirs))
    return dict(ours=s, ours_batch=b, theirs=t, speedup=s / t, speedup_batch=b / t)


def bench_learning(compiled, name: str, rounds: int, batch_seeds: int, cycles: int) -> dict:
    game = train.neural_game(compiled)
    spec = train.Spec()
    out = {}
    for label, seeds, levels in (("single", 1, 1), ("batched", batch_seeds, PAPER["entropies"])):
        configs = len(spec.algorithms) * seeds * levels
        run_seeds = np.repeat(np.arange(seeds), levels)
        entropy_index = np.tile(np.arange(levels), seeds)
        keys = {a: train.configuration_keys(0, name, a, entropy_index, run_seeds)
                for a in spec.algorithms}
        etas = {a: jnp.full(len(run_seeds), 0.1, jnp.float32) for a in spec.algorithms}
        states = {a: train.initial_states(spec, game, 0, name, tuple(range(seeds)), levels)
                  for a in spec.algorithms}
        state = [states]

        def step(count, state=state, keys=keys, etas=etas):
            state[0] = train.run_segment(spec, game, state[0], keys, etas, 0, count,
                                         np.float32(1.0))
            return state[0]

        jax.block_until_ready(step(1))
        rate = _median_rate(lambda: step(cycles), cycles * spec.critic_updates * configs, rounds)
        out[label] = dict(configs=configs, rate=rate)
    return out


def flops_per_iteration(compiled, spec: train.Spec) -> float:
    """Multiply-adds x 2 of the learning loop per configuration-iteration (networks only)."""
    macs_per_row = 0
    width = compiled.infostate_tensor.shape[1]
    for hidden in spec.hidden:
        macs_per_row += width * hidden
        width = hidden
    macs_per_row += width * compiled.num_actions
    depth = history_tree(compiled, jnp.float32).depth
    critic_rows = spec.critic_batch * depth  # per critic update: forward + backward (x3)
    per_cycle = spec.critic_updates * 3 * critic_rows * macs_per_row
    # per policy update: the critic's forward, the policy's forward (which is also the table
    # the cycle samples from) and its backward
    per_cycle += (1 + 3) * compiled.num_infostates * macs_per_row
    return 2.0 * per_cycle / spec.critic_updates


def machine() -> str:
    return describe(("jax", "jaxlib", "flax", "optax", "open_spiel"))


def hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def report(results: list[dict], command: str, gpu_tflops: float) -> str:
    lines = [
        "# Neural stage benchmark: neurd (JAX) vs OpenSpiel",
        "",
        f"Command: `{command}`  ",
        f"Date: {datetime.date.today().isoformat()}  ",
        f"Machine: {machine()}",
        "",
        "Medians over interleaved rounds. Sampling: whole episodes under the same random "
        "tabular policy. NashConv: of a freshly initialised network policy (float32 network, "
        "renormalised in float64); OpenSpiel gets it as a prebuilt `pyspiel.TabularPolicy`, "
        "ours includes everything from the policy table to the number. Learning: "
        "configuration-iterations (critic updates, with a policy update every 4) per second of "
        "the whole loop at the paper's batch sizes and network.",
        "",
        "| game | episodes/s: neurd / OpenSpiel rl_environment | speed-up | NashConv/s: neurd "
        "(batched) / pyspiel.nash_conv | speed-up (batched) | learning: config-iterations/s, "
        "one seed at one level (2 configs) / batched |",
        "| --- | --- | ---: | --- | ---: | --- |",
    ]
    for r in results:
        s, n, lr = r["sampling"], r["nash_conv"], r["learning"]
        lines.append(
            f"| {r['name']} | {s['ours']:.3g} / {s['theirs']:.3g} | {s['speedup']:.0f}x | "
            f"{n['ours']:.3g} ({n['ours_batch']:.3g}) / {n['theirs']:.3g} | "
            f"{n['speedup']:.0f}x ({n['speedup_batch']:.0f}x) | "
            f"{lr['single']['rate']:.3g} / {lr['batched']['rate']:.3g} "
            f"({lr['batched']['configs']} configs) |")
    configs = PAPER["seeds"] * PAPER["algorithms"] * PAPER["entropies"]
    iterations = PAPER["phase_iterations"] * PAPER["phases"]
    lines += ["", f"Paper scale: {configs} configurations per game ({PAPER['seeds']} seeds x "
              f"{PAPER['algorithms']} algorithms x {PAPER['entropies']} entropy levels) x "
              f"{iterations:.2e} iterations.", "",
              "| game | FLOP per config-iteration | paper-scale FLOP | this machine (batched "
              f"rate) | GPU at {gpu_tflops:g} TFLOP/s sustained (estimate) |",
              "| --- | ---: | ---: | ---: | ---: |"]
    total_cpu = total_gpu = 0.0
    for r in results:
        work = configs * iterations
        cpu = work / r["learning"]["batched"]["rate"]
        flop = r["flops"] * work
        gpu = flop / (gpu_tflops * 1e12)
        total_cpu, total_gpu = total_cpu + cpu, total_gpu + gpu
        lines.append(f"| {r['name']} | {r['flops'] / 1e6:.1f} M | {flop:.2e} | {hours(cpu)} | "
                     f"{hours(gpu)} |")
    lines += [f"| all | | | {hours(total_cpu)} | {hours(total_gpu)} |", "",
              "The GPU column is arithmetic, not a measurement: FLOP of the networks only, at an "
              "assumed sustained rate; the sampler, the per-cycle kernel launches of a "
              "`fori_loop` and the checkpoint evaluations come on top. Where a GPU was "
              "measured, the section below has the real numbers and they take precedence.",
              ""]
    return "\n".join(lines)


GPU_HEADING = "## GPU, measured"


def gpu_section(paths) -> str:
    """The measured GPU table of every report in ``bench/gpu/*.json`` (from the GPU check)."""
    lines = [GPU_HEADING, "",
             "Throughput of `train.run_segment` at N configurations in one batch, a cycle being "
             "4 critic updates and 1 policy update (4 learning iterations); the checkpoint "
             "evaluation (every configuration's exact NashConv and critic error, float64) timed "
             "apart. Paper-scale minutes: 247,500 cycles plus 213 checkpoint evaluations per "
             "game, where the evaluation was timed. `neurd.publication.allocation.device_check` "
             "measures it (`make gpu-check`); the reports are `bench/gpu/*.json`.", ""]
    for path in sorted(paths):
        data = json.loads(Path(path).read_text())
        lines += [f"### {data['device']} ({data['date']})", "", f"Command: `{data['command']}`",
                  "", "| code | matmul precision | deterministic flag | game | N | ms/cycle | "
                  "config-iterations/s | checkpoint s | paper-scale min |",
                  "| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for r in data["throughput"]:
            lines.append(
                f"| {r['code']} | {r['precision']} | {'yes' if r['flag'] else 'no'} | "
                f"{r['game']} | {r['configurations']} | {r['ms_per_cycle']:.3f} | "
                f"{r['configuration_iterations_per_second']:,} | "
                f"{r.get('checkpoint_seconds', '-')} | {r['paper_scale_minutes']:.1f} |")
        lines += [""] + [f"- {c['check']}: {'passed' if c['ok'] else 'FAILED'}"
                         for c in data["checks"]]
        lines += [f"- {data['no_flag_repeatability']}" if "no_flag_repeatability" in data
                  else "", f"- {data['note']}" if "note" in data else "", ""]
    return "\n".join(line for line in lines) + "\n"


def with_gpu_section(text: str, paths) -> str:
    """``text`` with its GPU section (if any) replaced by the measured one."""
    text = text.split(GPU_HEADING)[0].rstrip() + "\n\n"
    return text + gpu_section(paths) if paths else text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=list(GAMES), choices=sorted(GAMES))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--episodes", type=int, default=4096, help="our episodes per call")
    parser.add_argument("--openspiel-seconds", type=float, default=1.0)
    parser.add_argument("--nashconv-batch", type=int, default=32)
    parser.add_argument("--learning-seeds", type=int, default=2,
                        help="seeds of the batched learning measurement (x 2 x 6 configs)")
    parser.add_argument("--cycles", type=int, default=50, help="policy updates per round")
    parser.add_argument("--gpu-tflops", type=float, default=10.0,
                        help="assumed sustained GPU rate for the estimate")
    parser.add_argument("--out", default=str(Path(__file__).with_name("NEURAL.md")))
    parser.add_argument("--gpu-section-only", action="store_true",
                        help="only rewrite the measured GPU section from bench/gpu/*.json")
    args = parser.parse_args(argv)
    gpu_reports = sorted(Path(__file__).with_name("gpu").glob("*.json"))
    if args.gpu_section_only:
        Path(args.out).write_text(with_gpu_section(Path(args.out).read_text(), gpu_reports))
        return 0
    results = []
    for name in args.games:
        compiled = games.compile_game(GAMES[name].string)
        policy = engine.random_policies(compiled, 1, seed=0)[0]
        result = dict(name=name)
        result["sampling"] = bench_sampling(compiled, policy, args.rounds, args.episodes,
                                            args.openspiel_seconds)
        result["nash_conv"] = bench_nash_conv(compiled, args.rounds, args.nashconv_batch)
        result["learning"] = bench_learning(compiled, name, args.rounds, args.learning_seeds,
                                            args.cycles)
        result["flops"] = flops_per_iteration(compiled, train.Spec())
        print(f"{name}: sampling {result['sampling']['speedup']:.0f}x, NashConv "
              f"{result['nash_conv']['speedup']:.0f}x, learning "
              f"{result['learning']['batched']['rate']:.3g} config-it/s", file=sys.stderr)
        results.append(result)
    command = "python bench/bench_neural.py " + " ".join(argv if argv is not None
                                                         else sys.argv[1:])
    text = with_gpu_section(report(results, command.strip(), args.gpu_tflops), gpu_reports)
    old = Path(args.out).read_text() if Path(args.out).exists() else ""
    if bench_cycle.HEADING in old:  # bench_cycle.py's section, kept as it was measured
        kept = old.split(bench_cycle.HEADING, 1)[1].split("\n## ", 1)[0]
        text = bench_cycle.with_section(text, bench_cycle.HEADING + kept)
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
