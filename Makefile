# The two commands a newcomer needs: `make demo` and `make test`. Both create .venv on first use;
# `make test` also installs what its tests need beyond it, so the two are all the set-up.
VENV ?= .venv
PYTHON ?= python3
STAMP := $(VENV)/.installed

.PHONY: install demo test test-evidence-312 kafka-jars chromium clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/fastci demo

# The whole suite, after what its tests need: the broker's jars, Chromium, and the evidence tests on
# Python 3.12 in their own venv. Uses the broker in $$FASTCI_KAFKA_BOOTSTRAP, or starts (and stops) one
# with docker/kafka/kafka.sh. PYTEST_ARGS goes to that pytest (CI: the slowest tests' durations).
test: $(STAMP) kafka-jars chromium test-evidence-312
	$(VENV)/bin/pytest $(PYTEST_ARGS)

# Kafka's jars from Maven Central into ~/.cache/fastci/kafka (needs Java 17 and Maven); a no-op once there.
kafka-jars:
	docker/kafka/kafka.sh fetch

# A test opens the nightly report in headless Chromium: Debian's package, installed when missing, as root
# or through sudo. Where neither apt-get nor a way to root exists, say so and go on: that one test fails
# naming what to install, the others still run.
chromium:
	@set -e; \
	if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ]; then as_root=""; elif command -v sudo >/dev/null 2>&1; then as_root="sudo"; \
	else echo "make chromium: no chromium, and neither root nor sudo to install it: install Chromium yourself" >&2; exit 0; fi; \
	if ! command -v apt-get >/dev/null 2>&1; then \
		echo "make chromium: no chromium, and no apt-get to install it: install Chromium yourself" >&2; exit 0; fi; \
	echo "== install Debian's chromium (a test opens the nightly report in a real browser)"; \
	$$as_root apt-get update -qq; \
	$$as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null

# Tracing evidence on Python 3.12 (sys.monitoring) in its own venv: the evidence tests, and the same
# project traced on 3.11 ($(VENV)) compared byte for byte. PYTHON312: python3.12 if it runs (a pyenv
# shim may exist and refuse), else pyenv's newest 3.12.
VENV312 ?= .venv312
PYTHON312 ?= $(shell python3.12 -c '' >/dev/null 2>&1 && echo python3.12 || \
	ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.12.*/bin/python3.12 2>/dev/null | sort -V | tail -1)
STAMP312 := $(VENV312)/.installed

$(STAMP312): pyproject.toml
	@test -n "$(PYTHON312)" || { echo "make test-evidence-312: no Python 3.12 found (python3.12 does not run and" \
		"no $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.12.*); install one or pass PYTHON312=/path/to/python3.12" >&2; exit 1; }
	$(PYTHON312) -m venv $(VENV312)
	$(VENV312)/bin/python -m pip install --quiet --upgrade pip
	$(VENV312)/bin/python -m pip install --quiet -e '.[test]'
	touch $(STAMP312)

test-evidence-312: $(STAMP) $(STAMP312)
	FASTCI_EVIDENCE_OTHER_PYTHON=$(abspath $(VENV))/bin/python $(VENV312)/bin/pytest tests/test_evidence_*.py

clean:
	rm -rf $(VENV) $(VENV312) .fastci .pytest_cache .hypothesis
