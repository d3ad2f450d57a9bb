"""The tiny world, built once per test session into a temporary cache."""

import contextlib
import io
import os
import time

import pytest


@pytest.fixture(scope="session")
def tiny_world(tmp_path_factory):
    from platonic.world.image import data as world_data

    try:
        world_data.require_debian_data()
    except world_data.MissingDataError as exc:  # pragma: no cover - make test installs them
        pytest.skip(str(exc))
    root = tmp_path_factory.mktemp("platonic-cache")
    old = {k: os.environ.get(k) for k in ("PLATONIC_CACHE", "PLATONIC_WORLD_PROFILE", "PLATONIC_QUIET")}
    os.environ.update(PLATONIC_CACHE=str(root), PLATONIC_WORLD_PROFILE="tiny")
    os.environ.pop("PLATONIC_QUIET", None)  # the build reports progress, into a log (not a terminal) kept here
    from platonic.experiments.checks.world import world_report
    from platonic.world.image.build import KINDS, ensure_world

    log = io.StringIO()
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(log):
        path = ensure_world("tiny", seed=0, progress=True, kinds=KINDS)  # both kinds in one build, as `platonic world build`
        world_report(path)
    seconds = time.perf_counter() - t0
    os.environ["PLATONIC_QUIET"] = "1"
    yield {"path": path, "root": root, "seconds": seconds, "log": log.getvalue()}
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
