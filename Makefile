# Two commands do all set-up on a fresh machine with Python 3.11 and pip:
#   make figures   # every figure at the default scale (results/figures/)
#   make test      # the test suite (make test-long: its end-to-end runs of minutes)
# Both create .venv from requirements.lock when it is missing or stale.

PYTHON ?= python3
VENV ?= .venv
CORES ?= 2
CONFIG ?= workflow/config/default.yaml
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: figures smoke paper test test-long test-all lint report lock clean-results gpu-check readings publish \
	paper-inputs gpu-allocation-inputs gpu-allocation publish-blocks zoo \
	cpu-allocation cpu-allocation-status cpu-allocation-stop \
	readings-paper readings-paper-status readings-paper-stop readings-paper-publish

$(STAMP): requirements.lock pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# The config file is checked first (neurd check-config): a missing or malformed
# file, or a bad key, is named before Snakemake starts; then the time the run should take
# here is said (neurd expected-time: a probe of about fifteen seconds against the runs timed
# whole in bench/figures_time.json).
figures: $(STAMP)
	$(BIN)/neurd check-config $(CONFIG)
	$(BIN)/neurd expected-time $(CONFIG)
	$(BIN)/snakemake --cores $(CORES) --configfile $(CONFIG)

# The readings study (not part of `make figures`): Fig 6's claims under every reading the
# paper leaves open (config section readings; results/readings/grid.md, grid.png).
readings: $(STAMP)
	$(BIN)/neurd check-config $(CONFIG)
	$(BIN)/snakemake readings --cores $(CORES) --configfile $(CONFIG)

# NeuRD's loss readings at the paper's length (docs/readings.md): starts the study detached
# from the shell, at the lowest priority, from a frozen copy of the commit checked out, for
# MINUTES (600 unless given), and returns at once; it resumes where the last one stopped
# (its saved states, or those published), running the commit its published cells ran
# (COMMIT=HEAD: the one checked out; a cell in progress then starts over). readings-paper-publish copies what it made into
# published/readings/paper-length and draws its table and figure: commit them.
READINGS_MINUTES = $(if $(filter command line environment,$(origin MINUTES)),$(MINUTES),600)
readings-paper: $(STAMP)
	$(BIN)/python -m neurd.paper_readings start --minutes $(READINGS_MINUTES) \
	  $(if $(COMMIT),--commit $(COMMIT))

readings-paper-status: $(STAMP)
	$(BIN)/python -m neurd.paper_readings status

readings-paper-stop: $(STAMP)
	$(BIN)/python -m neurd.paper_readings stop

readings-paper-publish: $(STAMP)
	$(BIN)/python -m neurd.paper_readings publish
	$(BIN)/python -m neurd.paper_readings report
	$(BIN)/python -m neurd.paper_readings raw-logits

# The zoo (not part of `make figures`): counterfactual NeuRD against SPG, CFR and CFR+ on
# every small two-player zero-sum game OpenSpiel registers (config section zoo; docs/zoo.md,
# whose generated part is written from the run's summary).
zoo: $(STAMP)
	$(BIN)/neurd check-config $(CONFIG)
	$(BIN)/snakemake zoo --cores $(CORES) --configfile $(CONFIG)
	results=$$($(BIN)/neurd check-config --results-dir $(CONFIG)) && \
	  $(BIN)/neurd zoo-page --config $$results/config/zoo.json \
	    --generated $$results/zoo/page.md --page docs/zoo.md

smoke: CONFIG = workflow/config/smoke.yaml
smoke: figures

paper: CONFIG = workflow/config/paper.yaml
paper: figures

# The tests in two parts: `make test` leaves out the end-to-end runs of minutes (the smoke
# pipeline, the allocations, the SLURM run, the oldest versions: marked long), `make
# test-long` runs those alone; `make test-all` runs both at once. .ci/run runs test, then
# test-long. Each prints its 15 slowest tests. Each runs its test files in TEST_WORKERS
# processes at once (pytest-xdist; the tests of one file in one process, so that a file's
# shared fixtures are built once; the files that share the smoke run in one), heaviest file
# first: by default one per core, as many as the memory holds at 5 GiB each
# (tests/conftest.py); TEST_WORKERS=0: all in pytest's own process.
TEST_WORKERS ?= auto
PYTEST := $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile
test: $(STAMP)
	$(PYTEST) -m "not long"

test-long: $(STAMP)
	$(PYTEST) -m long

test-all: $(STAMP)
	$(PYTEST)

# Publish a finished run's Fig 6 tables into its config's published.folder (published/paper
# for the paper scale; GAME=kuhn for one game, as soon as its run is done); make figures then
# draws fig6_<name> from them on any machine. See docs/paper-scale.md.
PUBLISH ?= workflow/config/paper.yaml
publish: $(STAMP)
	$(BIN)/neurd publish $(PUBLISH) $(if $(GAME),--game $(GAME))
	$(if $(filter workflow/config/paper.yaml,$(PUBLISH)),$(BIN)/neurd published-readme published/paper)

# The paper-scale Fig 6 in allocations (docs/paper-scale.md).
# Here, once per revision: the paper's config snapshot, its games compiled, the revision
# (paper-inputs: all a CPU allocation needs); for a GPU allocation also the source tree of
# BASELINE_REV with the games compiled by it (timed beside this one by an allocation that
# measures; a tree reads the compiled-game format of its day).
PAPER_RESULTS = results/paper
PAPER_GAMES_NPZ = $(PAPER_RESULTS)/neural/kuhn/game.npz $(PAPER_RESULTS)/neural/leduc/game.npz \
	$(PAPER_RESULTS)/neural/goofspiel/game.npz
BASELINE_REV ?= 1d22898
paper-inputs: $(STAMP)
	$(BIN)/snakemake $(PAPER_RESULTS)/config/neural.json $(PAPER_GAMES_NPZ) --cores $(CORES) \
	  --configfile workflow/config/paper.yaml --config 'neural={allow_cpu: true}'
	$(BIN)/python -c 'import json; from neurd.revision import git_revision, source_hash; \
	  print(json.dumps({**git_revision("."), "source_hash": source_hash()}))' \
	  > $(PAPER_RESULTS)/revision.json

gpu-allocation-inputs: paper-inputs
	rm -rf $(PAPER_RESULTS)/baseline $(PAPER_RESULTS)/allocation  # (a dry run's work: not carried)
	mkdir -p $(PAPER_RESULTS)/baseline
	git archive $(BASELINE_REV) src | tar -x -C $(PAPER_RESULTS)/baseline
	for game in kuhn leduc goofspiel; do \
	  (cd $(PAPER_RESULTS)/baseline && PYTHONPATH=src $(abspath $(BIN))/python -m neurd.cli \
	    neural-game --config ../config/neural.json --game $$game \
	    --out neural/$$game/game.npz) || exit 1; done

# This machine's CPU in the background (docs/paper-scale.md): starts an allocation of
# MINUTES (150 unless given) detached from the shell, at nice 19, and returns at once; its
# log and status say what it does; stop it early with cpu-allocation-stop (which, after an
# allocation ended without packing, packs what it left); publish what it packed into CPU_OUT
# with publish-blocks, and commit.
CPU_MINUTES = $(if $(filter command line environment,$(origin MINUTES)),$(MINUTES),150)
CPU_OUT ?= $(PAPER_RESULTS)/cpu-allocation-out
cpu-allocation: paper-inputs
	$(BIN)/python -m neurd.publication.allocation cpu start --minutes $(CPU_MINUTES) --out $(CPU_OUT)

cpu-allocation-status:
	$(BIN)/python -m neurd.publication.allocation cpu status --out $(CPU_OUT)

cpu-allocation-stop:
	$(BIN)/python -m neurd.publication.allocation cpu stop --out $(CPU_OUT)

# On the GPU machine (python3 with jax for CUDA; no venv, Snakemake or OpenSpiel needed), with
# results/paper carried there: check, measure if no table of this card is given, run the seed
# blocks that fit, pack them into OUT.  THROUGHPUT: earlier allocations' reports.
MINUTES ?= 9.5
OUT ?= $(PAPER_RESULTS)/allocation-out
THROUGHPUT ?= $(wildcard bench/gpu/allocations/*.json)
gpu-allocation:
	PYTHONPATH=src $(PYTHON) -m neurd.publication.allocation gpu --minutes $(MINUTES) --out $(OUT) \
	  $(foreach t,$(THROUGHPUT),--throughput $(t)) \
	  $(if $(wildcard $(PAPER_RESULTS)/baseline/src),--baseline $(PAPER_RESULTS)/baseline/src)

# Back here: check the packed blocks in FROM (folders holding blocks.json; by default the
# GPU's OUT and the CPU's CPU_OUT, those that hold a pack) and add them to published/paper,
# the README's sentence on its seeds, the findings' section on them and the paper-scale page's
# cost of the rest (per game and processor measured in bench/cpu); each allocation's
# report is kept in bench/gpu/allocations/ (a GPU's) or bench/cpu/allocations/ (a CPU's).
# Commit them.  With no pack there (or FROM given empty) it says in one line where it looked,
# before anything runs (published-add would only be told of no PACK at all).
FROM ?= $(foreach f,$(OUT) $(CPU_OUT),$(if $(wildcard $(f)/blocks.json $(f)/*/blocks.json),$(f)))
NO_PACK = $(if $(filter file,$(origin FROM)),neither OUT=$(OUT) nor CPU_OUT=$(CPU_OUT) holds \
  a pack (blocks.json),FROM is empty); name the folder of a pack with FROM=<folder>
publish-blocks: $(STAMP)
	@test -n "$(strip $(FROM))" || { echo "publish-blocks: $(NO_PACK)" >&2; exit 1; }
	$(BIN)/neurd published-add workflow/config/paper.yaml $(FROM) \
	  --keep-reports bench/gpu/allocations --keep-cpu-reports bench/cpu/allocations
	$(BIN)/neurd published-readme published/paper
	$(BIN)/neurd published-findings published/paper
	$(BIN)/neurd published-costs published/paper

# The first thing to run on a GPU machine (its .venv with JAX for CUDA: pip install -e ".[cuda]"):
# the neural stage there is finite, bitwise repeatable, close to the CPU, runs end to end
# (stopped by a wall-time budget and resumed), and how fast (neurd.publication.allocation.device_check); then the
# tests marked gpu. Report: results/benchmarks/gpu-check/report.md.
GAMES_NPZ = results/neural/kuhn/game.npz results/neural/leduc/game.npz results/neural/goofspiel/game.npz
gpu-check: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) results/config/neural.json $(GAMES_NPZ)
	$(BIN)/python -m neurd.publication.allocation.device_check --games results/neural --config results/config/neural.json \
	  --out results/benchmarks/gpu-check --extra
	$(BIN)/python -m pytest -m gpu

lint: $(STAMP)
	$(BIN)/snakemake --lint
	$(BIN)/ruff check .
	$(BIN)/snakefmt --check Snakefile workflow/rules

# The scale's results folder: results/ for the default, results/<scale>/ otherwise.
RESULTS = $$($(BIN)/neurd check-config --results-dir $(CONFIG) 2>/dev/null || echo invalid-config)

# The report of the default target, and of the readings study when it has been run.
report: $(STAMP)
	$(BIN)/neurd check-config $(CONFIG)
	root=$(RESULTS); targets=$$(test -f $$root/readings/grid.png && echo "all readings"); \
	$(BIN)/snakemake $$targets --cores $(CORES) --configfile $(CONFIG) --report $$root/report.html

# Re-pin requirements.lock, in a scratch venv: the newest versions within pyproject.toml's
# bounds (runtime, test and SLURM dependencies), resolved by pip; then write the conda
# environments from it. pyproject's lower bounds are the oldest versions tested
# (tests/test_oldest_versions.py); the extras' bounds follow the lock (tests/test_packaging.py).
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/python -m pip install --quiet --upgrade pip
	.lock-venv/bin/python -m pip install --quiet ".[test,slurm]"
	.lock-venv/bin/python -m pip freeze --exclude neurd > requirements.lock
	.lock-venv/bin/python workflow/envs/from_lock.py
	rm -rf .lock-venv build

# Remove one scale's results (CONFIG's): the default's leave the other scales' alone.
clean-results: $(STAMP)
	$(BIN)/neurd check-config $(CONFIG)
	root=$(RESULTS); if [ "$$root" = results ]; then \
	  rm -rf results/matrix results/rps results/tabular results/games results/neural results/readings \
	         results/published results/zoo \
	         results/figures results/audit results/config results/logs results/benchmarks \
	         results/provenance.json results/provenance.html results/report.html; \
	else rm -rf "$$root"; fi
