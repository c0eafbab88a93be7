"""Moved to :mod:`opgen.runtime.mindspore_graph` (which every generated package carries a copy of, as
``<pkg>/_runtime/mindspore_graph.py``); this name is that module, for packages generated before the move."""

from __future__ import annotations

import sys

from ...runtime import mindspore_graph as _moved

sys.modules[__name__] = _moved
