"""Detection and redaction of personally identifiable information (seed 001 "PII Redaction").

Detected, in this order (earlier spans win over overlapping later ones):

- ``EMAIL`` → ``[REDACTED_EMAIL]``: ``local@domain.tld`` (a practical subset of RFC 5322).
- ``IBAN`` → ``[REDACTED_IBAN]``: candidates checked with the ISO 13616 mod-97 check
  (python-stdnum).
- ``CARD`` → ``[REDACTED_CARD]``: 13–19 digits, spaces or dashes between groups, that pass
  the Luhn check (python-stdnum).
- ``IP`` → ``[REDACTED_IP]``: IPv4 and IPv6 addresses that Python's ``ipaddress`` accepts.
- ``PHONE`` → ``[REDACTED_PHONE]``: Google's libphonenumber matcher (the ``phonenumbers``
  package, offline), in international form and in the national forms of
  ``PII_PHONE_REGIONS`` (default US, GB, DE, FR).

Dates, version numbers, plain ids and amounts are left alone (see the test corpus).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

import phonenumbers
from django.conf import settings
from stdnum import iban, luhn

PLACEHOLDERS = {
    "EMAIL": "[REDACTED_EMAIL]",
    "IBAN": "[REDACTED_IBAN]",
    "CARD": "[REDACTED_CARD]",
    "IP": "[REDACTED_IP]",
    "PHONE": "[REDACTED_PHONE]",
}

_EMAIL = re.compile(
    r"(?<![\w.+-])[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+"
    r"[A-Za-z]{2,24}(?![\w-])"
)
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,4})?\b")
_CARD = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
_IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")


@dataclass(frozen=True)
class Finding:
    """One detected item: its type (a key of ``PLACEHOLDERS``) and span in the text."""

    type: str
    start: int
    end: int


def _emails(text: str) -> list[Finding]:
    return [Finding("EMAIL", m.start(), m.end()) for m in _EMAIL.finditer(text)]


def _ibans(text: str) -> list[Finding]:
    return [Finding("IBAN", m.start(), m.end()) for m in _IBAN.finditer(text)
            if iban.is_valid(m.group())]


def _cards(text: str) -> list[Finding]:
    found = []
    for m in _CARD.finditer(text):
        digits = re.sub(r"\D", "", m.group())
        if 13 <= len(digits) <= 19 and luhn.is_valid(digits) and len(set(digits)) > 1:
            found.append(Finding("CARD", m.start(), m.end()))
    return found


def _ips(text: str) -> list[Finding]:
    found = []
    for pattern in (_IPV4, _IPV6):
        for m in pattern.finditer(text):
            try:
                ipaddress.ip_address(m.group())
            except ValueError:
                continue
            found.append(Finding("IP", m.start(), m.end()))
    return found


def _phones(text: str) -> list[Finding]:
    """The first region is matched leniently (any possible number of at least 10 digits, so
    the seed's "123-456-7890" counts); the others, and 7-digit local numbers, must be valid
    numbers of their region, which keeps dates and ids out."""
    found = []
    for i, region in enumerate(settings.PII_PHONE_REGIONS):
        leniency = phonenumbers.Leniency.POSSIBLE if i == 0 else phonenumbers.Leniency.VALID
        for m in phonenumbers.PhoneNumberMatcher(text, region, leniency=leniency):
            digits = sum(ch.isdigit() for ch in m.raw_string)
            if leniency == phonenumbers.Leniency.POSSIBLE and digits < 10 and not (
                phonenumbers.is_valid_number(m.number)
            ):
                continue
            found.append(Finding("PHONE", m.start, m.end))
    return found


def detect(text: str) -> list[Finding]:
    """Non-overlapping findings in ``text``, by position."""
    kept: list[Finding] = []
    for detector in (_emails, _ibans, _cards, _ips, _phones):
        for finding in detector(text):
            if all(finding.end <= k.start or finding.start >= k.end for k in kept):
                kept.append(finding)
    return sorted(kept, key=lambda f: f.start)


def redact(text: str) -> tuple[str, list[Finding]]:
    """``(redacted text, findings)``: every finding replaced by its placeholder."""
    findings = detect(text)
    parts: list[str] = []
    position = 0
    for finding in findings:
        parts.append(text[position:finding.start])
        parts.append(PLACEHOLDERS[finding.type])
        position = finding.end
    parts.append(text[position:])
    return "".join(parts), findings
