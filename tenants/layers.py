"""The seven layers of seed 001: identifiers, the requirements matrix, precedence, access.

Source: seed 001, "Layer Hierarchy" → "Layer Requirements Matrix", "Layer Resolution" →
``getLayerPrecedence`` and ``getAccessibleLayers``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from enum import StrEnum
from typing import Any

from memory_project.errors import InvalidInput, InvalidLayer, MissingIdentifier
from memory_project.validation import unstorable_text


class Layer(StrEnum):
    """A memory layer, most specific first."""

    AGENT = "agent"
    USER = "user"
    SESSION = "session"
    PROJECT = "project"
    TEAM = "team"
    ORG = "org"
    COMPANY = "company"


#: Precedence when merging: 1 is highest (seed 001, ``getLayerPrecedence``).
PRECEDENCE: dict[Layer, int] = {layer: i for i, layer in enumerate(Layer, start=1)}

#: camelCase identifier → model column.
IDENTIFIER_FIELDS: dict[str, str] = {
    "agentId": "agent_id",
    "userId": "user_id",
    "sessionId": "session_id",
    "projectId": "project_id",
    "teamId": "team_id",
    "orgId": "org_id",
    "companyId": "company_id",
}

#: Required identifiers per layer (seed 001, "Layer Requirements Matrix").
REQUIRED: dict[Layer, tuple[str, ...]] = {
    Layer.AGENT: ("agentId", "userId"),
    Layer.USER: ("userId",),
    Layer.SESSION: ("userId", "sessionId"),
    Layer.PROJECT: ("projectId",),
    Layer.TEAM: ("teamId",),
    Layer.ORG: ("orgId",),
    Layer.COMPANY: ("companyId",),
}

MAX_IDENTIFIER_LENGTH = 255


@dataclass(frozen=True)
class LayerIdentifiers:
    """The identifiers of a call (seed 001 ``LayerIdentifiers``); every field optional."""

    agentId: str | None = None
    userId: str | None = None
    sessionId: str | None = None
    projectId: str | None = None
    teamId: str | None = None
    orgId: str | None = None
    companyId: str | None = None

    @classmethod
    def from_mapping(cls, data: dict[str, Any] | None) -> LayerIdentifiers:
        """Build from a camelCase mapping; unknown keys and bad values raise.

        Raises:
            InvalidInput: an unknown key, a non-string value, an empty or over-long value,
                or a NUL character.
        """
        if data is None:
            data = {}
        if not isinstance(data, dict):  # [], "", 0 and false are not "no identifiers"
            raise InvalidInput("identifiers must be an object.")
        unknown = sorted(set(data) - set(IDENTIFIER_FIELDS))
        if unknown:
            raise InvalidInput(
                f"Unknown identifier(s): {', '.join(map(str, unknown))}.",
                details={"allowed": list(IDENTIFIER_FIELDS)},
            )
        values: dict[str, str | None] = {}
        for key, value in data.items():
            if value is None:
                continue
            if not isinstance(value, str) or not value.strip():
                raise InvalidInput(f"{key} must be a non-empty string.")
            if len(value) > MAX_IDENTIFIER_LENGTH or unstorable_text(value):
                raise InvalidInput(
                    f"{key} must be at most {MAX_IDENTIFIER_LENGTH} characters, without NUL "
                    "or unpaired surrogate characters."
                )
            values[key] = value
        return cls(**values)

    def as_dict(self) -> dict[str, str]:
        """The identifiers that are set, camelCase."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}

    def with_values(self, **values: str | None) -> LayerIdentifiers:
        """A copy with the given identifiers filled in where they are not set already."""
        updates = {k: v for k, v in values.items() if v and getattr(self, k) is None}
        return replace(self, **updates)


def parse_layer(value: Any) -> Layer:
    """The :class:`Layer` named ``value``.

    Raises:
        InvalidLayer: ``value`` names no layer (not retryable).
    """
    try:
        return Layer(value)
    except ValueError:
        raise InvalidLayer(
            f"Unknown layer {value!r}.", details={"allowed": [layer.value for layer in Layer]}
        ) from None


def require_identifiers(layer: Layer, identifiers: LayerIdentifiers) -> dict[str, str]:
    """The column filter that scopes ``layer`` for ``identifiers``.

    Returns:
        ``{"user_id": "u1", ...}``: the layer's required identifiers as model columns.

    Raises:
        MissingIdentifier: a required identifier is absent; ``details.required`` names all
            of the layer's required identifiers and ``details.missing`` the absent ones.
    """
    required = REQUIRED[layer]
    missing = [name for name in required if getattr(identifiers, name) is None]
    if missing:
        raise MissingIdentifier(
            f"Layer {layer.value!r} requires {', '.join(required)}; missing {', '.join(missing)}.",
            details={"layer": layer.value, "required": list(required), "missing": missing},
        )
    return {IDENTIFIER_FIELDS[name]: getattr(identifiers, name) for name in required}


def accessible_layers(identifiers: LayerIdentifiers) -> list[Layer]:
    """Layers the identifiers grant, most specific first (seed 001 ``getAccessibleLayers``).

    userId + projectId → user, project, team, org, company (when the hierarchy has filled
    in teamId, orgId and companyId).
    """
    return [
        layer for layer in Layer
        if all(getattr(identifiers, name) is not None for name in REQUIRED[layer])
    ]
