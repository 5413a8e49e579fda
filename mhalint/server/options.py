"""What the editor may set: the client's initialization options, and `workspace/didChangeConfiguration`'s
`mhalint` section. They are a layer over the workspace's configuration file, as `mhalint check`'s options are."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mhalint.configuration import schema
from mhalint.finding import Severity

_CAMEL = re.compile(r"(?<=[a-z])([A-Z])")
_LISTS = ("select", "extend-select", "ignore")
KNOWN = (*_LISTS, "min-severity", "debounce")


class OptionsError(ValueError):
    """An option the client sent that mhalint cannot use; the message names it."""


@dataclass(frozen=True)
class ClientOptions:
    select: tuple[str, ...] | None = None  # None: the configuration file's (or all rules)
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] | None = None
    min_severity: str | None = None
    debounce: float = 0.3  # seconds of quiet typing before a burst of changes is checked

    @classmethod
    def parse(cls, raw: Any) -> ClientOptions:
        """The options from the client's JSON object (keys in the configuration file's kebab-case, or camelCase
        as editors write them: `minSeverity`); None or an empty object is the defaults."""
        if raw is None:
            return cls()
        if not isinstance(raw, dict):
            raise OptionsError(f"the options must be an object with the keys {', '.join(KNOWN)}, not "
                               f"{schema.shown(raw)}")
        values: dict[str, Any] = {}
        for key, value in raw.items():
            name = _CAMEL.sub(r"-\1", str(key)).lower()
            if name not in KNOWN:
                raise OptionsError(f"unknown option `{schema.named(str(key))}`; known options: {', '.join(KNOWN)}")
            values[name.replace("-", "_")] = _value(name, value)
        return cls(**values)


def _value(name: str, value: Any):
    if name in _LISTS:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise OptionsError(f"option `{name}` must be a list of rule codes or prefixes, not {schema.shown(value)}")
        return tuple(part.strip().upper() for item in value for part in item.split(",") if part.strip())
    if name == "min-severity":
        choices = [str(s) for s in Severity]
        if value not in choices:
            raise OptionsError(f"option `min-severity` must be one of {', '.join(choices)}, not {schema.shown(value)}")
        return value
    try:
        return schema.NUMBERS["debounce"].check(value) / 1000
    except ValueError as error:
        raise OptionsError(f"option `debounce` {error}") from None
