"""`make test`'s two workers build each world once only if every test of that world lives in its folder
(tests/conftest.py schedules a world folder as one unit): a test elsewhere that asks for a world fixture
would make a second worker build the world again."""

import ast
from pathlib import Path

from helpers import WORLD_FOLDERS

TESTS = Path(__file__).parent
ROOT = TESTS.parent


def session_fixtures(path: Path) -> set[str]:
    """Names of the functions of `path` decorated @pytest.fixture(scope="session")."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef):
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call) and any(k.arg == "scope" and getattr(k.value, "value", None) == "session"
                                                      for k in dec.keywords):
                    out.add(node.name)
    return out


def test_every_session_fixture_and_its_users_live_in_one_world_folder():
    files = sorted(TESTS.rglob("*.py"))
    owner = {}
    for path in files:
        for name in session_fixtures(path):
            folder = next((f for f in WORLD_FOLDERS if path.relative_to(ROOT).as_posix().startswith(f)), None)
            assert folder, f"session fixture {name} in {path.relative_to(ROOT)} is outside {WORLD_FOLDERS}"
            owner[name] = folder
    assert {"tiny_world", "tiny_audio_world", "tiny_audio"} <= set(owner)
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                for arg in node.args.args:
                    if arg.arg in owner:
                        assert rel.startswith(owner[arg.arg]), f"{rel}::{node.name} asks for {arg.arg}: move it under {owner[arg.arg]}"
