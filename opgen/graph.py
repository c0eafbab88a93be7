"""Compatibility: the MindSpore graph helpers live in :mod:`opgen.runtime.mindspore_graph`.

Packages generated (and wheels built) before the move import ``opgen.graph``; importing it
gives that module itself (one module object: its registries and graph substitutions are
shared). New code imports the backend's module.
"""

from __future__ import annotations

import sys

from .runtime import mindspore_graph as _graph

sys.modules[__name__] = _graph
