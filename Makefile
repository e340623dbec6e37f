# Avatar Studio — `make run` opens the studio, `make test` runs every test.
# Both install what they need first (system packages via apt, a virtual env in .venv).
VENV ?= .venv
PY := $(VENV)/bin/python
STUDIO := $(VENV)/bin/avatar-studio
export OPENBLAS_NUM_THREADS ?= 1
export PYQTGRAPH_QT_LIB ?= PySide6
# Inference runtime extra: cpu (onnxruntime) or gpu (onnxruntime-gpu); `make run RUNTIME=gpu`.
RUNTIME ?= cpu

.PHONY: run test test-fresh demo bench lint bundle model setup setup-dev clean

setup:
	@scripts/setup.sh system
	@scripts/setup.sh venv $(RUNTIME)

setup-dev:
	@scripts/setup.sh system dev
	@scripts/setup.sh venv $(RUNTIME),dev,train

run: setup
	@if [ -n "$$DISPLAY" ] && xdpyinfo >/dev/null 2>&1; then \
		$(STUDIO) gui; \
	else \
		echo "No display found (DISPLAY is unset or unreachable)."; \
		echo "To see the studio: run it on a desktop, or over 'ssh -X', or on a virtual screen:"; \
		echo "    xvfb-run -a -s '-screen 0 1600x1000x24' make run"; \
		echo "Rendering a demo video instead (make demo)..."; \
		$(MAKE) --no-print-directory demo; \
	fi

demo: setup
	$(STUDIO) render --out demo.mp4 --cue 1
	@echo "Wrote $$(pwd)/demo.mp4"

test: setup-dev
	@scripts/run-tests.sh

# The README's quick start on a bare Debian: a minbase root, a fresh clone of HEAD, make test and make run.
test-fresh:
	@scripts/test-fresh.sh

bench: setup-dev
	scripts/with-services.sh $(STUDIO) bench --out bench.json

lint: setup-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

bundle: setup-dev
	$(VENV)/bin/pyinstaller --noconfirm --clean --distpath dist --workpath build/pyinstaller packaging/avatar-studio.spec
	@echo "Bundle: dist/avatar-studio/avatar-studio"

model: setup-dev
	$(PY) -m assets.model.train --out assets/models

clean:
	rm -rf build dist demo.mp4 bench.json
