"""Moved to :mod:`opgen.runtime.pytorch` (which every generated package carries a copy of, as
``<pkg>/_runtime/pytorch.py``); this name is that module, for packages generated before the move."""

from __future__ import annotations

import sys

from ...runtime import pytorch as _moved

sys.modules[__name__] = _moved
