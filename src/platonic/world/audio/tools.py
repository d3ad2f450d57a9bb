"""The Debian packages the audio world is rendered with, and running their programs.

Each program or data file is named with the package that ships it; a missing one raises
`MissingDataError` (the image world's error, a `PlatonicError`) in one line that names the package and
`make debian`. A program that fails raises `RenderError` with its exit status and last message line.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ...errors import MissingDataError, PlatonicError

# program -> Debian package
PROGRAMS = {"fluidsynth": "fluidsynth", "espeak-ng": "espeak-ng", "flite": "flite", "festival": "festival"}
SOUNDFONT = Path("/usr/share/sounds/sf2/FluidR3_GM.sf2")
SOUNDFONT_PACKAGE = "fluid-soundfont-gm"
FESTIVAL_VOICE_DIR = Path("/usr/share/festival/voices")
# festival voice -> (directory under FESTIVAL_VOICE_DIR, Debian package)
FESTIVAL_VOICES = {
    "kal_diphone": ("english/kal_diphone", "festvox-kallpc16k"),
    "ked_diphone": ("english/ked_diphone", "festvox-kdlpc16k"),
    "cmu_us_slt_arctic_hts": ("us/cmu_us_slt_arctic_hts", "festvox-us-slt-hts"),
}
DEBIAN_PACKAGES = tuple(sorted({*PROGRAMS.values(), SOUNDFONT_PACKAGE, *(p for _, p in FESTIVAL_VOICES.values())}))


class RenderError(PlatonicError, RuntimeError):
    """A sound engine failed or produced something unusable."""


def _missing(what: str, package: str) -> MissingDataError:
    return MissingDataError(f"{what}: install the Debian package `{package}` "
                            f"(sudo apt-get install {package}, or `make debian`)")


def require_program(name: str) -> str:
    """The path of program `name` (a key of PROGRAMS); MissingDataError naming its package if absent."""
    path = shutil.which(name)
    if path is None:
        raise _missing(f"the program `{name}` is not on PATH", PROGRAMS[name])
    return path


def require_soundfont() -> Path:
    """The General MIDI soundfont (FluidR3_GM.sf2); MissingDataError naming `fluid-soundfont-gm` if absent."""
    if not SOUNDFONT.is_file():
        raise _missing(f"no General MIDI soundfont at {SOUNDFONT}", SOUNDFONT_PACKAGE)
    return SOUNDFONT


def require_festival_voice(voice: str) -> None:
    """MissingDataError naming the festvox package when festival voice `voice` is not installed."""
    sub, package = FESTIVAL_VOICES[voice]
    if not (FESTIVAL_VOICE_DIR / sub).is_dir():
        raise _missing(f"no festival voice {voice} in {FESTIVAL_VOICE_DIR / sub}", package)


def require_audio_packages() -> None:
    """Check every program, the soundfont and the festival voices the audio world needs."""
    for name in PROGRAMS:
        require_program(name)
    require_soundfont()
    for voice in FESTIVAL_VOICES:
        require_festival_voice(voice)


def run(args: list[str], cwd: Path | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    """Run an engine (args[0] a key of PROGRAMS); RenderError in one line when it fails."""
    exe = require_program(args[0])
    proc = subprocess.run([exe, *args[1:]], cwd=cwd, input=stdin, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or proc.stdout or "").splitlines() if ln.strip()]
        raise RenderError(f"{args[0]} failed (exit {proc.returncode}): {lines[-1] if lines else 'no message'}")
    return proc
