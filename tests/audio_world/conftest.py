"""The tiny audio data, rendered once per test session."""

import pytest


@pytest.fixture(scope="session")
def tiny_audio():
    from platonic.world.audio import dataset, tools

    try:
        tools.require_audio_packages()
    except tools.MissingDataError as exc:  # pragma: no cover - make test installs them
        pytest.skip(str(exc))
    return dataset.build_audio_data(dataset.SIZES["tiny"], seed=0, progress=False)
