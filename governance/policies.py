"""Policy evaluation: what a set of tenant policies says about one write.

Denied terms match whole words or phrases, case-insensitively. Denied patterns are regular
expressions run by the ``regex`` package with a timeout (``POLICY_REGEX_TIMEOUT_SECONDS``,
default 50 ms), so a catastrophic-backtracking pattern cannot stall a request: it is refused
when saved if it times out on adversarial probes, and a match that still times out counts as
a violation (fail closed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import regex
from django.conf import settings

from governance.models import PiiHandling, Policy
from governance.pii import Finding, detect, redact
from memory_project.errors import InvalidInput
from tenants.input_checks import reject_unknown_keys, reject_unstorable
from tenants.layers import Layer

MAX_PATTERNS = 50
MAX_PATTERN_LENGTH = 500
MAX_TERMS = 500
#: Lengths the policy table can hold: ``name`` is a 200-character column, the others JSON.
MAX_NAME_LENGTH = 200
MAX_DESCRIPTION_LENGTH = 2000
MAX_ENTRY_LENGTH = 1000
#: The largest ``max_content_length`` (a PostgreSQL ``integer``); any value above a memory's
#: own limit (``MEMORY_MAX_CONTENT_LENGTH``) simply never triggers.
MAX_CONTENT_LENGTH_LIMIT = 2_147_483_647
#: Inputs that make backtracking regular expressions explode.
_PROBES = ("a" * 3000 + "!", "x" * 3000, " " * 3000 + "!", "ab" * 1500 + "c", "0" * 3000 + "x")


@dataclass(frozen=True)
class Violation:
    """A broken rule: the policy's name and id, the rule, and a human-readable detail."""

    policy: str
    policy_id: str
    rule: str
    detail: str

    def as_dict(self) -> dict[str, str]:
        return {"policy": self.policy, "policyId": self.policy_id, "rule": self.rule,
                "detail": self.detail}


@dataclass
class Decision:
    """The outcome for one write: the content to store (maybe redacted) and what was broken."""

    content: str
    violations: list[Violation] = field(default_factory=list)
    redactions: list[Finding] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.violations

    def as_dict(self) -> dict[str, Any]:
        return {
            "allowed": self.allowed,
            "content": self.content,
            "violations": [v.as_dict() for v in self.violations],
            "redactions": [{"type": f.type, "start": f.start, "end": f.end}
                           for f in self.redactions],
        }


def compile_pattern(pattern: Any) -> regex.Pattern[str]:
    """Compile a denied pattern and probe it for catastrophic backtracking.

    Raises:
        InvalidInput: not a string, too long, does not compile (the compiler's message is in
            ``details.error``), or too slow on the probes.
    """
    if not isinstance(pattern, str) or not pattern or len(pattern) > MAX_PATTERN_LENGTH:
        raise InvalidInput(f"A pattern must be a string of 1..{MAX_PATTERN_LENGTH} characters.")
    try:
        compiled = regex.compile(pattern, regex.IGNORECASE)
    except regex.error as err:
        raise InvalidInput(f"Invalid pattern {pattern!r}: {err}.",
                           details={"pattern": pattern, "error": str(err)}) from None
    for probe in _PROBES:
        try:
            compiled.search(probe, timeout=settings.POLICY_REGEX_TIMEOUT_SECONDS)
        except TimeoutError:
            raise InvalidInput(
                f"Pattern {pattern!r} is too slow (catastrophic backtracking); simplify it.",
                details={"pattern": pattern, "error": "timeout"},
            ) from None
    return compiled


def _term_regex(term: str) -> regex.Pattern[str]:
    return regex.compile(r"(?<!\w)" + regex.escape(term) + r"(?!\w)", regex.IGNORECASE)


def evaluate(policies: Iterable[Policy], *, content: str, metadata: dict[str, Any],
             layer: str, key_prefix: str | None = None,
             detector: Callable[[str], list[Finding]] = detect) -> Decision:
    """Check a write against every enabled policy that applies to the caller's key.

    ``detector``: PII detection to use (``governance.pii_guard.detector_for(ctx)`` bounds it
    for a tenant's request); it runs at most once per distinct text.
    """
    decision = Decision(content=content)
    scanned: dict[str, list[Finding]] = {}

    def findings(text: str) -> list[Finding]:
        if text not in scanned:
            scanned[text] = detector(text)
        return scanned[text]

    for policy in policies:
        if not policy.enabled:
            continue
        if policy.api_key_prefixes and key_prefix not in policy.api_key_prefixes:
            continue
        decision.violations.extend(_check(policy, content, metadata, layer))
        if policy.pii_handling == PiiHandling.DENY:
            found = findings(content)
            if found:
                kinds = ", ".join(sorted({f.type for f in found}))
                decision.violations.append(_violation(policy, "pii", f"contains {kinds}"))
        elif policy.pii_handling == PiiHandling.REDACT:
            decision.content, found = redact(decision.content, findings(decision.content))
            decision.redactions.extend(found)
    return decision


#: What a denied term or pattern becomes in a review preview.
DENIED_PLACEHOLDER = "[DENIED]"


def mask_denied(policies: Iterable[Policy], text: str) -> str:
    """``text`` with every span a denied term or pattern of an enabled policy matches
    replaced by :data:`DENIED_PLACEHOLDER`: what a reviewer sees and what approving stores,
    so a secret a policy caught (an ``sk-…`` token) is neither shown nor kept. A pattern that
    times out masks nothing (the write was refused for it anyway)."""
    for policy in policies:
        if not policy.enabled:
            continue
        for term in policy.denied_terms:
            text = _term_regex(term).sub(DENIED_PLACEHOLDER, text)
        for pattern in policy.denied_patterns:
            try:
                text = regex.compile(pattern, regex.IGNORECASE).sub(
                    DENIED_PLACEHOLDER, text, timeout=settings.POLICY_REGEX_TIMEOUT_SECONDS)
            except (TimeoutError, regex.error):
                continue
    return text


def _violation(policy: Policy, rule: str, detail: str) -> Violation:
    saved = not policy._state.adding  # an unsaved policy (the try-it box) has no id yet
    return Violation(policy=policy.name, policy_id=str(policy.pk) if saved else "", rule=rule,
                     detail=detail)


def _check(policy: Policy, content: str, metadata: dict[str, Any], layer: str
           ) -> list[Violation]:
    found: list[Violation] = []
    if policy.max_content_length and len(content) > policy.max_content_length:
        found.append(_violation(policy, "max_content_length",
                                f"{len(content)} > {policy.max_content_length} characters"))
    if policy.writable_layers and layer not in policy.writable_layers:
        found.append(_violation(policy, "writable_layers", f"layer {layer!r} is not writable"))
    missing = [k for k in policy.required_metadata if k not in (metadata or {})]
    if missing:
        found.append(_violation(policy, "required_metadata", f"missing {', '.join(missing)}"))
    for term in policy.denied_terms:
        if _term_regex(term).search(content):
            found.append(_violation(policy, "denied_term", f"contains {term!r}"))
    for pattern in policy.denied_patterns:
        try:
            hit = regex.compile(pattern, regex.IGNORECASE).search(
                content, timeout=settings.POLICY_REGEX_TIMEOUT_SECONDS)
        except (TimeoutError, regex.error):
            found.append(_violation(policy, "denied_pattern", f"{pattern!r} timed out"))
            continue
        if hit:
            found.append(_violation(policy, "denied_pattern", f"matches {pattern!r}"))
    return found


def clean_policy_data(data: Any, *, partial: bool = False) -> dict[str, Any]:
    """Validate a policy definition (API, admin, try-it box) and return it cleaned.

    Raises:
        InvalidInput: unknown fields, wrong types, invalid or too slow patterns, unknown
            layers or PII handling.
    """
    if not isinstance(data, dict):
        raise InvalidInput("A policy must be an object.")
    fields = {"name", "description", "enabled", "denied_terms", "denied_patterns",
              "pii_handling", "max_content_length", "writable_layers", "required_metadata",
              "api_key_prefixes"}
    reject_unknown_keys(data, fields, "policy field")
    if not partial and not data.get("name"):
        raise InvalidInput("A policy needs a name.")
    reject_unstorable(data, "policy")
    cleaned: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("name", "description"):
            limit = MAX_NAME_LENGTH if key == "name" else MAX_DESCRIPTION_LENGTH
            if not isinstance(value, str) or len(value) > limit:
                raise InvalidInput(f"{key} must be a string of at most {limit} characters.",
                                   details={"field": key, "max_length": limit})
            cleaned[key] = value.strip() if key == "name" else value
            if key == "name" and not cleaned[key]:
                raise InvalidInput("A policy needs a name.")
        elif key == "enabled":
            if not isinstance(value, bool):
                raise InvalidInput("enabled must be true or false.")
            cleaned[key] = value
        elif key in ("denied_terms", "required_metadata", "api_key_prefixes",
                     "writable_layers", "denied_patterns"):
            if not isinstance(value, list) or not all(
                    isinstance(v, str) and v and len(v) <= MAX_ENTRY_LENGTH for v in value):
                raise InvalidInput(f"{key} must be a list of non-empty strings of at most "
                                   f"{MAX_ENTRY_LENGTH} characters.", details={"field": key})
            if len(value) > (MAX_PATTERNS if key == "denied_patterns" else MAX_TERMS):
                raise InvalidInput(f"{key} has too many entries.")
            if key == "denied_patterns":
                for pattern in value:
                    compile_pattern(pattern)
            if key == "writable_layers":
                bad = [v for v in value if v not in {x.value for x in Layer}]
                if bad:
                    raise InvalidInput(f"Unknown layer(s) in writable_layers: {', '.join(bad)}.")
            cleaned[key] = list(dict.fromkeys(value))
        elif key == "pii_handling":
            if value not in PiiHandling.values:
                raise InvalidInput(f"pii_handling must be one of {', '.join(PiiHandling.values)}.")
            cleaned[key] = value
        elif key == "max_content_length":
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or not 1 <= value <= MAX_CONTENT_LENGTH_LIMIT):
                raise InvalidInput("max_content_length must be an integer within "
                                   f"1..{MAX_CONTENT_LENGTH_LIMIT}, or null.",
                                   details={"field": key, "max": MAX_CONTENT_LENGTH_LIMIT})
            cleaned[key] = value
    return cleaned
