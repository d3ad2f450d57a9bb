# Two entry points, each doing all of its own set-up on a fresh machine:
#   make demo   set up, then run the main job on the embedded default
#   make test   set up, then run the test suite
# Both are idempotent: a second run only re-installs when pyproject.toml changed.

PYTHON ?= python3.11
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
DEB_STAMP := $(VENV)/.debian
# Real data the embedded world is built from (Debian packages): images, icon themes and their SVG renderer
# (platonic.world.image.icons.ICON_PACKAGES), emoji fonts (platonic.world.image.emoji.EMOJI_PACKAGES), then the
# audio world's sound engines, soundfont and festival voices (platonic.world.audio.tools.DEBIAN_PACKAGES).
DEB_PACKAGES := dataset-fashion-mnist fonts-aenigma fonts-dejavu-core \
                adwaita-icon-theme tango-icon-theme gnome-icon-theme mate-icon-theme lxde-icon-theme breeze-icon-theme \
                numix-icon-theme oxygen-icon-theme elementary-icon-theme faba-icon-theme librsvg2-bin \
                fonts-noto-color-emoji fonts-symbola fonts-unifont \
                fluidsynth fluid-soundfont-gm espeak-ng flite festival festvox-kallpc16k festvox-kdlpc16k festvox-us-slt-hts

.PHONY: setup demo test bench clean debian

setup: $(STAMP) $(DEB_STAMP)

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet --upgrade pip
	@# a venv made before the distribution was renamed platonic-ta holds it as 'platonic': drop that first
	$(PY) -m pip uninstall --quiet --yes platonic 2>/dev/null || true
	rm -rf src/platonic.egg-info
	@# pip byte-compiles what it installs on one core (about 60 s of a fresh set-up here): install without it, then
	@# compile the environment on every core; as pip does, a file that does not compile (a dependency's code for
	@# another Python) is left to the interpreter, so compileall's exit status is not the install's
	$(PY) -m pip install --quiet --no-compile torch==2.14.1 torchvision==0.29.1 -e '.[test]'
	$(PY) -m compileall -q -j 0 $(VENV)/lib >/dev/null 2>&1 || true
	touch $(STAMP)

# Installs the Debian data packages when missing; needs root (as on this project's machines and CI).
# Re-checked whenever the Makefile (so the package list) changes.
$(DEB_STAMP): Makefile | $(VENV)/bin/python
	@missing=""; for p in $(DEB_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; fi; \
	fi
	touch $(DEB_STAMP)

debian: $(DEB_STAMP)

# Two workers, one thread each; the tests of one built world run on one worker (tests/conftest.py).
test: setup
	$(PY) -m pytest -q -n 2 --dist loadfile

# The protocols on the image world on pretrained trunks and, beside them, negation on the audio world (each world
# built on first use; scripts/demo.sh says why beside; `platonic demo --setup world` runs the protocols on the tiny
# from-scratch towers instead).
demo: setup
	bash scripts/demo.sh $(VENV)/bin

bench: setup
	$(PY) benchmarks/bench_solve.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info
