# The two commands a newcomer needs: `make run` and `make test`. Both install what they need first.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
STAGE ?= prod

.PHONY: install run test check lint typecheck bench deploy destroy package clean

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@# The project itself, editable, so that .venv/bin/brokerctl exists (no build isolation: the
	@# venv's setuptools is enough, and nothing is downloaded for it).
	$(PY) -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps -e .
	@touch $(STAMP)

install: $(STAMP)

# The metrics report test opens the HTML report in Debian's headless Chromium.
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing chromium (for the report test)"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
			|| echo "warning: chromium could not be installed: the browser test will be skipped"; \
	else \
		echo "note: no $(CHROMIUM) and not root: the browser test will be skipped (apt-get install chromium)"; \
	fi

run: $(STAMP)
	$(PY) -m brokerctl dev

test: $(STAMP) $(CHROMIUM)
	$(PY) -m pytest -W error $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: $(STAMP)
	$(VENV)/bin/mypy chalicelib brokerctl app.py

check: lint typecheck test

bench: $(STAMP)
	@for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

deploy: $(STAMP)
	$(PY) -m infra.deploy --stage $(STAGE) $(DEPLOY_ARGS)

destroy: $(STAMP)
	$(PY) -m infra.deploy --stage $(STAGE) --destroy $(DEPLOY_ARGS)

package: $(STAMP)
	$(PY) -m infra.deploy --stage $(STAGE) --package-only $(DEPLOY_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
