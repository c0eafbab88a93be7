"""Every ``OPGEN_*`` environment variable opgen reads: :mod:`opgen.runtime.env`, re-exported.

The parsers live in the runtime (generated packages read ``OPGEN_CHECK``, ``OPGEN_NUM_THREADS``...
where opgen is not installed, from their copy of it); the generator reads the same module here.
"""

from __future__ import annotations

from .runtime.env import VARIABLES as VARIABLES
from .runtime.env import EnvError as EnvError
from .runtime.env import Kind as Kind
from .runtime.env import Variable as Variable
from .runtime.env import check_all as check_all
from .runtime.env import check_kernel_variables as check_kernel_variables
from .runtime.env import choice as choice
from .runtime.env import command as command
from .runtime.env import count as count
from .runtime.env import flag as flag
from .runtime.env import path as path
from .runtime.env import seconds as seconds
