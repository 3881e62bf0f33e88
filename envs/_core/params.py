"""What every env family's params dataclass shares, written once.

A family's params class is a frozen dataclass over this base: its fields are the knobs, its
`__post_init__` checks them (envs/_core/checks.py) and hands the normalised values to
`_store`; building from gym.make kwargs, copying with changes and listing the fields are the
same for every family.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar, Self

from diagym.envs._core.checks import check_known


class EnvParams:
    """Base of a family's frozen params dataclass; TITLE names the env in error messages."""

    TITLE: ClassVar[str]

    def _store(self, normal: Mapping[str, Any]) -> None:
        """Keep the checked, normalised values (numpy integers as ints and the like), so equal
        settings compare equal: a frozen dataclass allows this only through
        object.__setattr__."""
        for name, value in normal.items():
            object.__setattr__(self, name, value)

    @classmethod
    def knobs(cls) -> tuple[str, ...]:
        """The knobs' names in declaration order: what a table of configurations has a
        column for, so a knob added to the dataclass reaches it."""
        return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]

    @classmethod
    def from_kwargs(cls, **kwargs: Any) -> Self:
        """Build from keyword arguments, rejecting unknown names with the list of known ones."""
        check_known(cls.TITLE, kwargs, cls.knobs())
        return cls(**kwargs)

    def replace(self, **changes: Any) -> Self:
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[call-overload]
