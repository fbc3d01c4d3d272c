# The two commands a newcomer needs: `make run` and `make test`. Both install what they need first.
# Python 3.12: the functions' Lambda runtime is the packaging interpreter's (Chalice). pyenv's shims
# answer for versions that are not active, so each candidate is run, not just looked up.
PY312 := $(firstword $(foreach p,python3.12 $(sort $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12)),$(shell $(p) -c 'import sys; assert sys.version_info[:2] == (3, 12)' >/dev/null 2>&1 && echo $(p))))
PYTHON ?= $(PY312)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
STAGE ?= prod

.PHONY: interop-js install run test check lint typecheck bench deploy destroy package clean localstack localstack-venv

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	@test -n "$(PYTHON)" || { echo "need Python 3.12 (python3.12 on PATH, or pyenv install 3.12)"; exit 1; }
	@# A venv of another Python (an earlier checkout's 3.11) is made again.
	@$(PY) -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null || { rm -rf $(VENV); $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	@# The project itself, editable, so that .venv/bin/brokerctl exists (no build isolation: the
	@# venv's setuptools is enough, and nothing is downloaded for it).
	$(PY) -m pip install --quiet --disable-pip-version-check --no-build-isolation --no-deps -e .
	@touch $(STAMP)

install: $(STAMP)

# The metrics report test and the console test (Playwright) use Debian's headless Chromium; the
# console test also runs in Debian's Firefox ESR (over WebDriver BiDi: tests/e2e/firefox_bidi.py).
CHROMIUM := /usr/bin/chromium
FIREFOX := /usr/bin/firefox-esr
$(CHROMIUM) $(FIREFOX):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "installing $(notdir $@) (for the browser tests)"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(notdir $@) >/dev/null) \
			|| echo "warning: $(notdir $@) could not be installed: its browser test will be skipped"; \
	else \
		echo "note: no $@ and not root: its browser test will be skipped (apt-get install $(notdir $@))"; \
	fi

# LocalStack's runtime, in host mode (no Docker), in a virtualenv of its own: it needs Python >= 3.12
# and pins its own boto3 and moto (brokerctl/localstack_host.py). Without Python >= 3.12 nothing is
# made and the LocalStack tests skip.
LS_STAMP := .venv-localstack/.installed
$(LS_STAMP): requirements-localstack.txt | $(STAMP)
	$(PY) -m brokerctl.localstack_host --install

localstack-venv: $(LS_STAMP)

# LocalStack without Docker on 127.0.0.1:$(LOCALSTACK_PORT) until Ctrl-C (docs/deploy.md).
LOCALSTACK_PORT ?= 4566
localstack: $(LS_STAMP)
	$(PY) -m brokerctl.localstack_host --port $(LOCALSTACK_PORT)

run: $(STAMP)
	$(PY) -m brokerctl dev

# The CloudEvents SDK for JavaScript for the interop test (tests/interop), from its lock file;
# without npm, or when the install fails, that test skips with the reason.
INTEROP_JS := tests/interop/js/node_modules/.package-lock.json
$(INTEROP_JS): tests/interop/js/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		(cd tests/interop/js && npm ci --no-audit --no-fund --loglevel=error) \
			|| echo "warning: npm ci failed in tests/interop/js: the interop test will be skipped"; \
	else \
		echo "note: no npm: the JavaScript interop test (tests/interop) will be skipped"; \
	fi

interop-js: $(INTEROP_JS)

# The in-process suites (no subprocess runtime, no emulator of their own) run on both cores; the
# rest (local runtimes, emulators, Spark, fault injection, timing) one test at a time, as their
# deadlines assume. PYTEST_ARGS runs what it names, in one process.
IN_PROCESS := tests/unit tests/functional tests/fuzz
test: $(STAMP) $(CHROMIUM) $(FIREFOX) $(LS_STAMP) $(INTEROP_JS)
ifeq ($(strip $(PYTEST_ARGS)),)
	$(PY) -m pytest -W error -n 2 --durations=10 $(IN_PROCESS)
	$(PY) -m pytest -W error --durations=25 $(addprefix --ignore=,$(IN_PROCESS))
else
	$(PY) -m pytest -W error $(PYTEST_ARGS)
endif

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
	rm -rf $(VENV) .venv-localstack .pytest_cache .mypy_cache .ruff_cache
