"""Reading a policy's JSON parameters strictly: unknown keys and wrong types
are refused with the key's path, as the Rust SDK's serde parsing refuses
them, so a typo never silently falls back to a default."""

from __future__ import annotations

import json
from typing import Any, Dict

from .types import PolicyError


def parameters(text: str) -> Dict[str, Any]:
    """Parses `snapshot.parameters` as a JSON object; empty text is `{}`."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as err:
        raise PolicyError(f"invalid parameters: {err}") from None
    if not isinstance(value, dict):
        raise PolicyError("invalid parameters: expected a JSON object")
    return value


def only_keys(params: Dict[str, Any], allowed: tuple) -> None:
    """Refuses any key of `params` not in `allowed`."""
    for key in params:
        if key not in allowed:
            raise PolicyError(
                f"invalid parameters: unknown field `{key}`, expected one of "
                + ", ".join(f"`{k}`" for k in allowed)
            )


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def string(params: Dict[str, Any], key: str, default: str) -> str:
    value = params.get(key, default)
    if not isinstance(value, str):
        raise PolicyError(f"invalid parameters: {key} must be a string")
    return value


def string_list(params: Dict[str, Any], key: str) -> list:
    value = params.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise PolicyError(f"invalid parameters: {key} must be a list of strings")
    return value


def number_map(params: Dict[str, Any], key: str, default: Dict[str, float]) -> Dict[str, float]:
    value = params.get(key, default)
    if not isinstance(value, dict):
        raise PolicyError(f"invalid parameters: {key} must be an object of numbers")
    for name, number in value.items():
        if not _number(number):
            raise PolicyError(f"invalid parameters: {key}.{name} must be a number")
    try:
        return {name: float(number) for name, number in value.items()}
    except OverflowError:
        raise PolicyError(f"invalid parameters: {key} holds a number out of range") from None
