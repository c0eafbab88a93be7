"""opgen: one YAML file per MindSpore custom operator.

``opgen generate ops/`` validates every spec (JSON Schema + semantic checks) and renders, with
Jinja2, the Custom (aot) wrappers, aot C ABI kernels, ``Function<T>`` classes and pybind11
bindings of a Python package; ``opgen build`` compiles them. See README.md.
"""

__version__ = "0.1.0"
