"""The tiny audio world (data, zoo, sources, report), built once per test session into a temporary cache."""

import contextlib
import io
import os
import resource
import time

import pytest


@pytest.fixture(scope="session")
def tiny_audio_world(tmp_path_factory):
    from platonic.world.audio import tools

    try:
        tools.require_audio_packages()
    except tools.MissingDataError as exc:  # pragma: no cover - make test installs them
        pytest.skip(str(exc))
    root = tmp_path_factory.mktemp("platonic-audio-cache")
    old = {k: os.environ.get(k) for k in ("PLATONIC_CACHE", "PLATONIC_WORLD_PROFILE", "PLATONIC_QUIET")}
    os.environ.update(PLATONIC_CACHE=str(root), PLATONIC_WORLD_PROFILE="tiny")
    os.environ.pop("PLATONIC_QUIET", None)  # the build reports progress into a log (not a terminal) kept here
    from platonic.experiments.checks.audio_world import audio_world_report
    from platonic.world.audio.build import ensure_audio_world
    from platonic.world.common.kinds import built_kinds

    def cpu() -> float:  # this process and its finished children (the build's workers, the renderers)
        own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime

    log = io.StringIO()
    c0, t0 = cpu(), time.perf_counter()
    with contextlib.redirect_stdout(log):
        path = ensure_audio_world("tiny", seed=0, progress=True)
    build_seconds = time.perf_counter() - t0
    kinds_first = built_kinds(path)  # the first use builds the full sources; the report adds the LoRA ones
    report = audio_world_report(path, diagnostics=False)
    seconds, cpu_seconds = time.perf_counter() - t0, cpu() - c0
    os.environ["PLATONIC_QUIET"] = "1"
    print(f"tiny audio world: build {build_seconds:.1f} s, build + report {seconds:.1f} s wall, {cpu_seconds:.1f} s CPU")
    yield {"path": path, "root": root, "seconds": seconds, "cpu_seconds": cpu_seconds, "build_seconds": build_seconds,
           "kinds_first": kinds_first,
           "log": log.getvalue(),
           "report": report}
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
