"""The door of the public functions: every object argument is of the kind the function takes, checked once.

The public functions (:mod:`hdtwd_cli._api`'s interface, which ``import hdtwd_cli`` re-exports) are wrapped
by :func:`at_the_door`: before any work, each argument named in :data:`KINDS` that is given (not ``None``)
must be an instance of its class, else a :class:`~hdtwd_cli.errors.ParameterError` names the argument, what it
must be and how one is made (``tree must be a hdtwd Tree (hd.learn_tree, hd.Tree.read), not list``): a
swapped or mistyped argument never reaches a stage as an ``AttributeError``. The values themselves (the
matrix, the names, the numbers) are checked by the function, once, as it canonicalises them.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from hdtwd_cli.errors import ParameterError

__all__ = ["KINDS", "at_the_door"]

F = TypeVar("F", bound=Callable[..., Any])

#: Argument name -> (``"module:Class"`` it must be an instance of, several joined by ``|``, by their public
#: names; how a user makes one). Classes are imported at the first check (AnnData's only where an ``adata``
#: is given).
KINDS: dict[str, tuple[str, str]] = {
    "tree": ("hdtwd_cli:Tree", "a hdtwd Tree (hd.learn_tree, hd.Tree.read)"),
    "params": ("hdtwd_cli:TreeParams", "a TreeParams (hd.TreeParams(...), TreeParams.from_preset)"),
    "joint": ("hdtwd_cli:JointParams", "a JointParams (hd.JointParams(...))"),
    "stored": (
        "hdtwd_cli:FeatureEmbedding|hdtwd_cli.io:EmbeddingRecord",
        "an embedding (hd.embed, hdtwd_cli.io.read_embedding)",
    ),
    "adata": ("anndata:AnnData", "an AnnData"),
}


@functools.cache
def _kind(argument: str) -> tuple[type, ...]:
    paths = [path.split(":") for path in KINDS[argument][0].split("|")]
    return tuple(getattr(importlib.import_module(module), name) for module, name in paths)


def _checked(argument: str, value: Any) -> None:
    if value is not None and not isinstance(value, _kind(argument)):
        raise ParameterError(f"must be {KINDS[argument][1]}, not {type(value).__name__}", argument)


def at_the_door(fn: F) -> F:
    """``fn`` with its object arguments (:data:`KINDS`) checked before it runs; the same signature and docs."""
    signature = inspect.signature(fn)
    checked = [name for name in signature.parameters if name in KINDS]

    @functools.wraps(fn)
    def door(*args: Any, **kwargs: Any) -> Any:
        try:
            given = signature.bind(*args, **kwargs).arguments
        except TypeError:  # a call Python itself refuses: its own message
            return fn(*args, **kwargs)
        for name in checked:
            if name in given:
                _checked(name, given[name])
        return fn(*args, **kwargs)

    return door  # type: ignore[return-value]
