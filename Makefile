# The two commands a newcomer needs: `make demo` and `make test`. Both create .venv on first use.
VENV ?= .venv
PYTHON ?= python3
STAMP := $(VENV)/.installed

.PHONY: install demo test test-evidence-312 clean

install: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/fastci demo

# Uses the broker in $$FASTCI_KAFKA_BOOTSTRAP, or starts (and stops) one with docker/kafka/kafka.sh.
test: $(STAMP)
	$(VENV)/bin/pytest

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
