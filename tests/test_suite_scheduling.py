"""`make test`'s two workers build each world once only if every test of that world lives in its folder
(tests/conftest.py schedules a world folder as one unit): a test elsewhere that asks for a world fixture
would make a second worker build the world again."""

import ast
from pathlib import Path

from helpers import WORLD_FOLDERS, world_folder

TESTS = Path(__file__).parent
ROOT = TESTS.parent


def session_fixtures(tree: ast.Module) -> set[str]:
    """Names of the functions of a parsed test file decorated @pytest.fixture(scope="session")."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call) and any(k.arg == "scope" and getattr(k.value, "value", None) == "session"
                                                      for k in dec.keywords):
                    out.add(node.name)
    return out


def test_every_session_fixture_and_its_users_live_in_one_world_folder():
    trees = {path.relative_to(ROOT).as_posix(): ast.parse(path.read_text()) for path in sorted(TESTS.rglob("*.py"))}
    owner = {}
    for rel, tree in trees.items():
        for name in session_fixtures(tree):
            folder = world_folder(rel)
            assert folder, f"session fixture {name} in {rel} is outside {WORLD_FOLDERS}"
            owner[name] = folder
    assert {"tiny_world", "tiny_audio_world", "tiny_audio"} <= set(owner)
    for rel, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                for arg in node.args.args:
                    if arg.arg in owner:
                        assert rel.startswith(owner[arg.arg]), f"{rel}::{node.name} asks for {arg.arg}: move it under {owner[arg.arg]}"


def test_the_suite_keeps_its_caches_out_of_the_users_cache_folder(request, tmp_path_factory):
    from platonic.paths import cache_root

    suite_cache = Path(request.config.suite_cache)  # set by tests/conftest.py's pytest_configure
    assert suite_cache.name.startswith("platonic-suite-cache-") and suite_cache.is_dir()
    assert not cache_root().is_relative_to(Path.home())
    # a world folder's session fixture points PLATONIC_CACHE at its own temporary folder until the session ends, and
    # xdist may have run it on this worker before this test
    assert cache_root() == suite_cache or cache_root().is_relative_to(tmp_path_factory.getbasetemp())
