"""How the command line reports errors: one line on stderr, `error: ...`, exit code 2, no traceback.

Every error platonic raises on purpose derives from `PlatonicError`; `OneLineErrors` (the group class of
`platonic.cli.app`) catches that one type, and click's own usage errors (a missing option, a value out
of range), and prints each as a single line, whatever the command:

    error: --batch-size: 0 is not in the range x>=1. See `platonic measure --help`.
"""

from __future__ import annotations

import sys
import warnings

from typer.core import TyperGroup

from ..errors import PlatonicError

try:  # typer >= 0.2x runs on its own copy of click; older ones on click itself
    from typer._click.exceptions import ClickException, NoArgsIsHelpError
    from typer.exceptions import Abort
except ImportError:  # pragma: no cover - depends on the installed typer
    from click.exceptions import Abort, ClickException, NoArgsIsHelpError

EXIT_ERROR = 2


def one_line(text) -> str:
    """`text` with every run of whitespace (newlines included) collapsed to one space."""
    return " ".join(str(text).split())


def print_error(message) -> None:
    """Write `error: MESSAGE` as one line on stderr (plain text: no markup, no wrapping)."""
    sys.stderr.write(f"error: {one_line(message)}\n")
    sys.stderr.flush()


def warning_line(message, category, filename, lineno, line=None) -> str:
    """A warning as the command line prints it: `warning: MESSAGE` on one line, without the source file and
    line of the code that warned (which say nothing to a user)."""
    return f"warning: {one_line(message)}\n"


def _usage_hint(exc: ClickException) -> str:
    ctx = getattr(exc, "ctx", None)
    if ctx is None:
        return ""
    return f" See `{ctx.command_path} --help`."


class OneLineErrors(TyperGroup):
    """A typer group whose errors are single lines on stderr.

    It runs click in non-standalone mode and handles the outcome itself: a `PlatonicError` that escaped
    a command, or a click usage error, becomes `error: ...` with exit code 2; `--help` and a group
    called without a command still print their help. Warnings print as one line, `warning: ...`.
    """

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode: bool = True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        formatter, warnings.formatwarning = warnings.formatwarning, warning_line
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except ClickException as exc:
            print_error(exc.format_message().rstrip(".") + "." + _usage_hint(exc))
            sys.exit(EXIT_ERROR)
        except Abort:
            print_error("aborted")
            sys.exit(1)
        except PlatonicError as exc:
            print_error(exc)
            sys.exit(EXIT_ERROR)
        finally:
            warnings.formatwarning = formatter
        sys.exit(rv if isinstance(rv, int) else 0)
