"""Whether a store buffers its uses, asked without loading the use buffer.

Only :mod:`memkeeper.storage.use_buffer` can turn buffering on (``enable``) or open a
read-only attempt (``reads_only``): while that module is not loaded, no store buffers and no
attempt is open. recall, search, a transition's flush and an erasure's discard ask here, so
a process that never buffers (the CLI, a plain library use) does not import it: about 7M
instructions, 3-4 ms, of every ``memkeeper recall`` (README, Performance: start-up).
"""

from __future__ import annotations

import sys
from typing import Any

_MODULE = "memkeeper.storage.use_buffer"


def buffering(storage: Any) -> Any:
    """``use_buffer.buffering(storage)``, or None while the use buffer is not loaded."""
    module = sys.modules.get(_MODULE)
    return module.buffering(storage) if module is not None else None


def may_write() -> None:
    """``use_buffer.may_write()``: raise ``NeedsWrite`` inside ``reads_only``; else nothing."""
    module = sys.modules.get(_MODULE)
    if module is not None:
        module.may_write()


def flush_inside(storage: Any) -> None:
    """``use_buffer.flush_inside(storage)``: nothing is buffered while it is not loaded."""
    module = sys.modules.get(_MODULE)
    if module is not None:
        module.flush_inside(storage)


def discard_everywhere(memory_ids: Any) -> None:
    """``use_buffer.discard_everywhere(ids)``: nothing is buffered while it is not loaded."""
    module = sys.modules.get(_MODULE)
    if module is not None:
        module.discard_everywhere(memory_ids)
