"""Class prompts: read from a file, or made from class names and a template with one `{}`.

    fill_template("a photo of a {}.", "cat")  ->  "a photo of a cat."

The template takes the class name where its single `{}` stands; any other brace is literal text, so
"a {} (class {id})" is fine and "{} vs {}" is refused with the reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from .errors import InvalidInputError


def check_template(template: str) -> str:
    """`template` if it has exactly one `{}` (where the class name goes); else raise naming the fix."""
    if not isinstance(template, str):
        raise InvalidInputError(f"a prompt template is a string with one '{{}}'; got {type(template).__name__}")
    count = template.count("{}")
    if count != 1:
        where = "no" if count == 0 else f"{count}"
        raise InvalidInputError(f"template {template!r} has {where} '{{}}'; it needs exactly one, where the class name goes "
                                "(e.g. 'a photo of a {}.')")
    return template


def fill_template(template: str, name: str) -> str:
    """The template with `name` in place of its single `{}`."""
    return check_template(template).replace("{}", name, 1)


def class_prompts(template: str, names: Iterable[str]) -> list[str]:
    """One prompt per class name (names stripped; empty ones skipped)."""
    check_template(template)
    return [fill_template(template, n.strip()) for n in names if n.strip()]


def read_prompt_file(path) -> list[str]:
    """The non-empty lines of a UTF-8 text file, stripped: one class prompt per line."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise InvalidInputError(f"prompts file {path} does not exist; give a text file with one class prompt per line") from None
    except IsADirectoryError:
        raise InvalidInputError(f"prompts file {path} is a directory; give a text file with one class prompt per line") from None
    except OSError as exc:
        raise InvalidInputError(f"cannot read the prompts file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"prompts file {path} is not UTF-8 text (byte {exc.start}: {exc.reason}); save it as UTF-8") from None
    lines = [ln.strip() for ln in text.removeprefix("\ufeff").splitlines() if ln.strip()]
    if not lines:
        raise InvalidInputError(f"{path} holds no prompts (one per line)")
    return lines
