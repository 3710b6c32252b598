"""Every core its configurations (:func:`neurd.neural.device.use_cores`,
:func:`neurd.neural.train.by_core`): a segment whose configurations are shared between several
CPU devices gives one device's numbers up to float rounding, repeats bit for bit on the same
devices, pads a batch the devices do not divide and drops the padding; the count is checked
as a config key would be, and a job's piece records it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest
from test_neural_variants import CYCLES, _compare, _run

from neurd import games
from neurd.names import GAMES
from neurd.neural import device, train

SRC = Path(__file__).resolve().parents[1] / "src"
# five devices for a batch of eight configurations: three each but the last, padded with two
DEVICES = 5
WORKER = f"""
import json, sys
import jax, numpy as np
from neurd.neural.device import use_cores, cpu_devices, device_description
use_cores()
from neurd import games
from neurd.names import GAMES
from neurd.neural import train
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_neural_variants import _run, _bitwise
name, out = sys.argv[1], sys.argv[2]
game = train.neural_game(games.compile_game(GAMES[name].string))
first = _run(train.Spec(), game, name)
again = _run(train.Spec(), game, name)
np.savez(out, *jax.tree_util.tree_leaves(first))
states = train.batch_inputs(train.Spec(), game, 0, name, (0, 1), (0.1, 1.0))
segment = train.run_segment(train.Spec(), game, *states, 0, 1, np.float32(1.0))
leaf = jax.tree_util.tree_leaves(segment)[0]
print(json.dumps(dict(devices=cpu_devices(), used=len(leaf.sharding.device_set),
                      rows=int(leaf.shape[0]), bitwise=_bitwise(first, again),
                      piece=device_description().get("cpu_devices"))))
"""


def _on_devices(name: str, count: int, tmp_path) -> tuple[dict, list]:
    env = dict(os.environ, JAX_NUM_CPU_DEVICES=str(count), JAX_PLATFORMS="cpu",
               PYTHONPATH=str(SRC))
    out = tmp_path / f"{name}.npz"
    done = subprocess.run([sys.executable, "-c", WORKER, name, str(out)], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    with np.load(out) as saved:
        return report, [saved[f"arr_{i}"] for i in range(len(saved.files))]


@pytest.mark.parametrize("name", [pytest.param(name, marks=() if name == "kuhn" else
                                               pytest.mark.long) for name in ("kuhn", "leduc")])
def test_configurations_shared_between_cpu_devices_give_one_devices_numbers(tmp_path, name):
    """Eight configurations on five CPU devices (the batch padded to ten and cut back): after
    ten cycles within the rounding the layouts are held to of one device's numbers, each
    state's rows in their configurations' places; bit for bit again on the same devices."""
    report, leaves = _on_devices(name, DEVICES, tmp_path)
    assert report == dict(devices=DEVICES, used=DEVICES, rows=4, bitwise=True, piece=DEVICES)
    game = train.neural_game(games.compile_game(GAMES[name].string))
    assert device.cpu_devices() == 1  # this process: one device, the reference
    reference = _run(train.Spec(), game, name)
    shared = jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(reference), leaves)
    _compare(reference, shared, f"{name} on {DEVICES} CPU devices after {CYCLES} cycles")
    # a configuration out of its place would be far off: the first two seeds' tables differ
    tables = np.asarray(shared[0]["neurd"].table)
    assert not np.allclose(tables[0], tables[1], atol=1e-3)


def test_the_count_of_cpu_devices_is_checked(monkeypatch):
    """Counts that are not positive whole numbers, or past the most a job may make, are refused
    by name (from the environment too), a count asked once the backend has started with
    another is refused, and the default then keeps what it has."""
    for huge in (device.MAX_CPU_DEVICES + 1, 10**9, 2**63):
        with pytest.raises(ValueError, match=f"{huge} is more than {device.MAX_CPU_DEVICES}"):
            device.use_cores(huge)
    monkeypatch.setenv(device.CPU_DEVICES_VARIABLE, str(10**9))
    with pytest.raises(ValueError, match=f"{10**9} is more than"):
        device.use_cores()
    monkeypatch.delenv(device.CPU_DEVICES_VARIABLE)
    for bad in (0, -1, True, 2.5, float("nan"), float("inf"), "2", None):
        if bad is None:
            monkeypatch.setenv(device.CPU_DEVICES_VARIABLE, "two")
            with pytest.raises(ValueError, match="JAX_NUM_CPU_DEVICES is 'two'"):
                device.use_cores()
            monkeypatch.delenv(device.CPU_DEVICES_VARIABLE)
            continue
        with pytest.raises(ValueError, match="not a positive whole number"):
            device.use_cores(bad)
    jax.devices()  # the backend has started here, with one CPU device
    have = len(jax.local_devices(backend="cpu"))
    assert device.use_cores(have) == have and device.use_cores() == have
    with pytest.raises(ValueError, match=f"started with {have}"):
        device.use_cores(have + 1)
    monkeypatch.setenv(device.CPU_DEVICES_VARIABLE, str(have + 1))
    with pytest.raises(ValueError, match=f"started with {have}"):
        device.use_cores()


def test_by_core_refuses_arrays_not_batched_alike():
    """What is shared between devices must be batched on one leading axis, named by sizes."""
    with pytest.raises(ValueError, match=r"sizes \[3, 4\]"):
        train.by_core(lambda *a: a, np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match=r"sizes \[3, None\]"):
        train.by_core(lambda *a: a, np.ones(3), np.float32(1.0))
    assert np.array_equal(train.by_core(lambda a, b: a + b[:, 0], np.ones(3), np.ones((3, 2))),
                          np.full(3, 2.0))


def test_an_exact_critic_job_makes_one_cpu_device(monkeypatch):
    """A job of the exact critic asks for one CPU device (its cycle's tiny operations run
    slower shared between devices), the learned critic's for one per core; the environment's
    count, where set, for either; a critic that is neither is refused by name."""
    monkeypatch.delenv(device.CPU_DEVICES_VARIABLE, raising=False)
    assert device.job_devices("exact") == 1 and device.job_devices("learned") is None
    monkeypatch.setenv(device.CPU_DEVICES_VARIABLE, "3")
    assert device.job_devices("exact") is None and device.job_devices("learned") is None
    with pytest.raises(ValueError, match="'tabular' is not"):
        device.job_devices("tabular")
