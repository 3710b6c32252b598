"""Running on a cluster: every rule that runs as a job declares its resources, and every rule
of the smoke scale runs through ``--profile profiles/slurm`` on a real single-node SLURM started
here, every job as a SLURM job, with tables equal to a local run's.

The SLURM test needs Debian's ``slurmctld``, ``slurmd``, ``slurm-client`` and ``munge`` and
root (``.ci/run`` installs them); without them it is skipped and says why.  It starts its own
``munged``, ``slurmctld`` and ``slurmd`` and stops exactly those.  The nested ``srun`` of the
executor's job step drops ``SLURM_CONF``, so while it runs the test links its config at
``/etc/slurm/slurm.conf`` (only where no config exists there) and removes the link after.
"""

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import copy_workflow

ROOT = Path(__file__).resolve().parents[1]
SYSTEM_CONF = Path("/etc/slurm/slurm.conf")
SEARCH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "sinfo", "srun")
TIME_LIMIT = 1500  # seconds for the whole SLURM run, a hard limit


def _rule_blocks(text: str):
    """``(name, body)`` of every rule in a Snakemake file (generated rules by their ``name:``)."""
    for match in re.finditer(r"(?m)^([ \t]*)rule(?: (\w+))?:\n((?:\1    .*\n|[ \t]*\n)*)", text):
        body = match.group(3)
        name = match.group(2) or re.search(r"name:\s*\n?\s*(\S+)", body).group(1)
        yield name, body


def _shared_resources(texts: list[str]) -> dict[str, str]:
    """Resource dicts the rules share (``NAME = {"mem_mb": ..., ...}``), by name, as their
    text with each key written as a keyword (``mem_mb=``), as a rule's own would be."""
    found = {}
    for text in texts:
        for name, body in re.findall(r"(?m)^([A-Z_]+) = (\{.*\})$", text):
            found[name] = re.sub(r'"(\w+)":\s*', r"\1=", body)
    return found


def test_every_rule_that_runs_as_a_job_declares_threads_and_resources():
    checked = 0
    paths = sorted((ROOT / "workflow/rules").glob("*.smk"))
    shared = _shared_resources([path.read_text() for path in paths])
    for path in paths:
        for name, body in _rule_blocks(path.read_text()):
            if "localrule: True" in body:
                continue
            checked += 1
            where = f"{path.name}: rule {name}"
            assert re.search(r"^\s+threads:", body, re.M), f"{where} declares no threads"
            resources = body.split("resources:", 1)[1] if "resources:" in body else ""
            resources += "".join(shared.get(n, "") for n in re.findall(r"\*\*([A-Z_]+)",
                                                                         resources))
            assert "mem_mb=" in resources and "runtime=" in resources, (
                f"{where} declares no mem_mb and runtime")
    assert checked >= 14


def test_runtimes_grow_with_the_config():
    from neurd.pipeline.neural_resources import job_runtime_minutes
    from neurd.pipeline.tabular import (
        check_runtime_minutes,
        reference_runtime_minutes,
        sweep_runtime_minutes,
    )

    tabular = {"learners": ["neurd", "spg"], "step_sizes": [1.0] * 9, "iterations": 200,
               "checkpoints": 15, "reference_iterations": None,
               "reference_solvers": ["cfr_rm", "cfr_plus"], "openspiel_check_iterations": 1000}

    def minutes():
        return tuple(f(tabular, "leduc") for f in (sweep_runtime_minutes,
                                                   reference_runtime_minutes,
                                                   check_runtime_minutes))

    small = minutes()
    tabular["iterations"] = 100_000
    large = minutes()
    # OpenSpiel's check runs over the first 1000 iterations whatever the run's length
    assert small == (11, 11, 11) and large[0] > small[0] and large[1] > small[1]
    assert large[2] == small[2]
    tabular["openspiel_check_iterations"] = None
    assert check_runtime_minutes(tabular, "leduc") > 30
    neural = {"algorithms": ["neurd", "spg"], "entropies": [0.0] * 6, "seeds_per_job": 20,
              "phase_iterations": {"leduc": 330_000}, "phases": 3,
              "throughput": {"leduc": 100_000}}
    assert job_runtime_minutes(neural, "leduc") == 10 + 80  # 2 x 2376 s of work, rounded up


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(predicate, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise TimeoutError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    missing = [p for p in PROGRAMS if shutil.which(p, path=SEARCH) is None]
    if missing:
        pytest.skip(f"SLURM is not installed on this machine (missing {missing}); .ci/run "
                    "installs Debian's slurmctld, slurmd, slurm-client and munge")
    if os.geteuid() != 0:
        pytest.skip("starting munged and slurmd needs root")
    if SYSTEM_CONF.exists() or SYSTEM_CONF.is_symlink():
        pytest.skip(f"{SYSTEM_CONF} exists: this machine has its own SLURM, left untouched")
    home = tmp_path_factory.mktemp("slurm")
    os.chmod(home, 0o700)
    for sub in ("state", "spool", "munge"):
        (home / sub).mkdir(mode=0o700)
    key = home / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    os.chmod(key, 0o600)
    munge_socket = home / "munge" / "munge.socket"
    memory = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20 * 0.8)
    conf = home / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=neurdtest", "SlurmctldHost=localhost(127.0.0.1)",
        "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge",
        f"AuthInfo=socket={munge_socket}", f"StateSaveLocation={home}/state",
        f"SlurmdSpoolDir={home}/spool", f"SlurmctldPidFile={home}/slurmctld.pid",
        f"SlurmdPidFile={home}/slurmd.pid", f"SlurmctldPort={_free_port()}",
        f"SlurmdPort={_free_port()}", "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none", "SchedulerType=sched/backfill", "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core_Memory",
        # squeue forgets finished jobs after MinJobAge: keep them for the status checks
        "MinJobAge=3600", "ReturnToService=2", "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none", "MpiDefault=none",
        f"SlurmctldLogFile={home}/slurmctld.log", f"SlurmdLogFile={home}/slurmd.log",
        f"NodeName=localhost NodeAddr=127.0.0.1 CPUs={os.cpu_count()} "
        f"RealMemory={memory} State=UNKNOWN",
        "PartitionName=main Nodes=localhost Default=YES MaxTime=INFINITE State=UP", ""]))
    env = dict(os.environ, SLURM_CONF=str(conf), PATH=SEARCH)
    started = []

    def start(*command):
        log = open(home / f"{Path(command[0]).name}.out", "w")
        started.append(subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env))

    SYSTEM_CONF.parent.mkdir(parents=True, exist_ok=True)
    SYSTEM_CONF.symlink_to(conf)
    try:
        start(shutil.which("munged", path=SEARCH), "--foreground", "--force",
              f"--socket={munge_socket}", f"--key-file={key}",
              f"--pid-file={home}/munge/munged.pid", f"--seed-file={home}/munge/seed",
              f"--log-file={home}/munge/munged.log")
        _wait(munge_socket.exists, 30, "munged")
        start(shutil.which("slurmctld", path=SEARCH), "-D", "-f", str(conf))
        start(shutil.which("slurmd", path=SEARCH), "-D", "-f", str(conf))

        def idle():
            out = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True,
                                 env=env)
            return out.returncode == 0 and out.stdout.strip() == "idle"

        _wait(idle, 60, "the SLURM node to come up idle")
        yield env
    finally:
        for process in reversed(started):
            process.send_signal(signal.SIGTERM)
        for process in reversed(started):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        SYSTEM_CONF.unlink(missing_ok=True)


def _job_stats(output: str) -> dict[str, int]:
    """``{rule: jobs}`` of the "Job stats" table Snakemake prints before it runs."""
    stats = output.split("Job stats:", 1)[1].split("total", 1)[0]
    return {rule: int(n) for rule, n in re.findall(r"(?m)^(\w+)\s+(\d+)\s*$", stats)}


# The smoke scale's figures but Leduc's Fig 4b: every rule of the scale that makes a job once
# or more, without Leduc's tabular jobs, which repeat Kuhn's rules at more cost.
SLURM_TARGETS = [f"results/smoke/figures/{name}.png" for name in (
    "fig1", "fig2", "fig3", "fig4a", "fig4b_kuhn", "fig5", "fig6", "fig6_smoke")]
LOCAL_RULES = {"all", "config_snapshot", "tabular_nashconv", "claims_audit", "provenance",
               "neural_combine", "published_tables"}


@pytest.mark.workflow
def test_every_rule_of_the_smoke_scale_runs_as_slurm_jobs_with_the_local_tables(
        slurm, smoke_run, tmp_path):
    on_slurm = copy_workflow(tmp_path / "slurm")
    smoke = ["--configfile", "workflow/config/smoke.yaml"]
    whole = subprocess.run([sys.executable, "-m", "snakemake", "-n", *smoke], cwd=on_slurm,
                           capture_output=True, text=True, env=slurm)
    assert whole.returncode == 0, whole.stderr[-3000:]
    every_rule = set(_job_stats(whole.stdout + whole.stderr))
    # The plugin first asks SLURM for its jobs' states 40 s after submitting, and Snakemake
    # again every 10 s (a courtesy to a busy cluster's controller): on this one-node cluster
    # that waiting was a good part of the run. Here both wait 1 s.
    run = subprocess.run([sys.executable, "-m", "snakemake", "--profile", "profiles/slurm",
                          *smoke, "--slurm-init-seconds-before-status-checks", "1",
                          "--seconds-between-status-checks", "1", *SLURM_TARGETS],
                         cwd=on_slurm, env=slurm, capture_output=True, text=True,
                         timeout=TIME_LIMIT)
    assert run.returncode == 0, (run.stdout + run.stderr)[-5000:]
    submitted = set(re.findall(r"submitted with SLURM jobid (\d+)", run.stdout + run.stderr))
    jobs = subprocess.run(["scontrol", "show", "jobs", "-o"], capture_output=True, text=True,
                          env=slurm, check=True).stdout.splitlines()
    states = {re.search(r"JobId=(\d+)", j).group(1): re.search(r"JobState=(\w+)", j).group(1)
              for j in jobs}
    assert submitted and submitted <= set(states)
    assert {states[j] for j in submitted} == {"COMPLETED"}
    # every rule of the whole smoke scale that makes a job ran (the run's summaries, local
    # rules of every figure, are left to the local run), and every job but the local rules'
    # on SLURM
    counts = _job_stats(run.stdout + run.stderr)
    assert set(counts) == every_rule - {"all", "claims_audit", "provenance"}, sorted(
        every_rule ^ set(counts))
    expected = sum(n for rule, n in counts.items() if rule not in LOCAL_RULES)
    assert len(submitted) == expected > 20
    # the profile's set-threads gives each neural job two CPUs (locally it asks for one)
    asked = {}
    for line in jobs:
        job = re.search(r"JobId=(\d+)", line).group(1)
        if job in submitted:
            comment = re.search(r"Comment=(\S*)", line)
            rule = "neural_run" if comment and "neural_run" in comment.group(1) else "other"
            asked.setdefault(rule, set()).add(int(re.search(r"NumCPUs=(\d+)", line).group(1)))
    assert asked == {"neural_run": {2}, "other": {1}}, jobs[:2]
    # its tables are the local run's (the smoke scale's tables are all under results/smoke)
    tables = sorted(p.relative_to(on_slurm) for p in (on_slurm / "results").rglob("*.parquet"))
    assert len(tables) >= 25
    for table in tables:
        pd.testing.assert_frame_equal(pd.read_parquet(on_slurm / table),
                                      pd.read_parquet(smoke_run / table), check_exact=True)
