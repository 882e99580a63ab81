"""Where the suite finds the shared speech set, for every test folder.

The set is read in place, never copied into the repository: SOTTO_AUDIO_DIR
when it is set (a clone anywhere), else ../shared/audio beside the clone
(as CI lays it out). `import audio` works from every test folder
(pytest.ini: pythonpath = tests); tests/unit/test-source-alsa.c follows the
same rule in C. A missing set fails the tests that need it, never skips.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
AUDIO_DIR = Path(os.environ.get("SOTTO_AUDIO_DIR") or REPO.parent / "shared" / "audio").resolve()
MANIFEST = AUDIO_DIR / "manifest.tsv"
