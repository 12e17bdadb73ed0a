# The two commands a newcomer needs: `make demo` and `make test`. Both create .venv on first use.
VENV ?= .venv
PYTHON ?= python3
STAMP := $(VENV)/.installed

.PHONY: install demo test clean

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

clean:
	rm -rf $(VENV) .fastci .pytest_cache .hypothesis
