"""Detection and redaction of personally identifiable information (seed 001 "PII Redaction").

Detected, in this order (earlier spans win over overlapping later ones):

- ``EMAIL`` → ``[REDACTED_EMAIL]``: ``local@domain.tld`` (a practical subset of RFC 5322).
- ``IBAN`` → ``[REDACTED_IBAN]``: candidates checked with the ISO 13616 mod-97 check
  (python-stdnum).
- ``CARD`` → ``[REDACTED_CARD]``: 13–19 digits, spaces or dashes between groups, that pass
  the Luhn check (python-stdnum); only whole groups are taken.
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
_CARD = re.compile(r"(?<![\d-])\d+(?:[ -]\d+)*(?![\d-])")
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
    """Runs of digit groups (single spaces or dashes between them) are split into cards at
    group boundaries: the longest run of whole groups with 13–19 digits passing Luhn wins,
    so digits written next to a card ("4111 1111 1111 1111 12/25") do not hide it."""
    found = []
    for run in _CARD.finditer(text):
        groups = [(run.start() + g.start(), run.start() + g.end())
                  for g in re.finditer(r"\d+", run.group())]
        i = 0
        while i < len(groups):
            for j in range(min(len(groups), i + 19) - 1, i - 1, -1):
                start, end = groups[i][0], groups[j][1]
                digits = re.sub(r"\D", "", text[start:end])
                if 13 <= len(digits) <= 19 and luhn.is_valid(digits) and len(set(digits)) > 1:
                    found.append(Finding("CARD", start, end))
                    i = j
                    break
            i += 1
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


def _digit_groups(text: str) -> list[int]:
    return [len(group) for group in re.findall(r"\d+", text)]


def _usual_grouping(region: str) -> list[int]:
    """How ``region`` groups the digits of a national number, e.g. US ``(201) 555-0123`` →
    ``[3, 3, 4]`` (libphonenumber's formatting of the region's example number)."""
    example = phonenumbers.example_number(region)
    if example is None:
        return []
    return _digit_groups(phonenumbers.format_number(example,
                                                    phonenumbers.PhoneNumberFormat.NATIONAL))


#: Digits closer than this belong to one phone candidate window: libphonenumber allows at
#: most a few punctuation characters between digit blocks, and an extension marker
#: ("extension", "ext.", "#") before the extension's digits.
_WINDOW_GAP = 40
#: Context kept on each side of a window: the matcher looks at the characters around a
#: candidate (a letter or digit next to it rejects it; "+" and brackets lead it).
_WINDOW_MARGIN = 24


def phone_windows(text: str) -> list[tuple[int, int]]:
    """Spans of ``text`` that can hold a phone number: digits with their neighbourhood,
    merged when close. Prose between them is never handed to libphonenumber's matcher,
    which costs time per character even where there is nothing to find (figures:
    ``docs/performance.md``, "PII detection")."""
    windows: list[tuple[int, int]] = []
    for m in re.finditer(r"\d+", text):
        start, end = max(0, m.start() - _WINDOW_MARGIN), min(len(text), m.end() + _WINDOW_MARGIN)
        if windows and m.start() - (windows[-1][1] - _WINDOW_MARGIN) <= _WINDOW_GAP:
            windows[-1] = (windows[-1][0], end)
        else:
            windows.append((start, end))
    return windows


def _phones(text: str, regions: tuple[str, ...]) -> list[Finding]:
    """Valid numbers of every region in ``regions``, written with a grouping that region
    uses (libphonenumber's ``STRICT_GROUPING``: this keeps dates such as ``08.05.2023`` and
    ids such as ``2023-000123`` out).

    Numbers that are merely *possible* in the first region (the seed's "123-456-7890" has no
    real US area code) count only when written in that region's usual grouping, optionally
    after the country code: ``123-456-7890``, ``(555) 123-4567``, ``+1 123 456 7890`` — not
    an unformatted run of digits such as an order id or a timestamp.

    The matcher runs on :func:`phone_windows` only (a property test holds the result equal to
    running it on the whole text).
    """
    windows = phone_windows(text)
    found = []
    for region in regions:
        for offset, end in windows:
            for m in phonenumbers.PhoneNumberMatcher(
                    text[offset:end], region, leniency=phonenumbers.Leniency.STRICT_GROUPING):
                found.append(Finding("PHONE", offset + m.start, offset + m.end))
    if not regions:
        return found
    usual = _usual_grouping(regions[0])
    for offset, end in windows:
        for m in phonenumbers.PhoneNumberMatcher(text[offset:end], regions[0],
                                                 leniency=phonenumbers.Leniency.POSSIBLE):
            groups = re.findall(r"\d+", m.raw_string)
            if len(groups) == len(usual) + 1 and groups[0] == str(m.number.country_code):
                groups = groups[1:]
            if usual and [len(g) for g in groups] == usual:
                found.append(Finding("PHONE", offset + m.start, offset + m.end))
    return found


def detect(text: str, regions: tuple[str, ...] | None = None) -> list[Finding]:
    """Non-overlapping findings in ``text``, by position.

    ``regions``: phone regions (default ``settings.PII_PHONE_REGIONS``). Pure: with
    ``regions`` given it reads no settings, so it can run in a worker process
    (``governance.pii_guard``).
    """
    if regions is None:
        regions = tuple(settings.PII_PHONE_REGIONS)
    kept: list[Finding] = []
    for detector in (_emails, _ibans, _cards, _ips):
        for finding in detector(text):
            if all(finding.end <= k.start or finding.start >= k.end for k in kept):
                kept.append(finding)
    for finding in _phones(text, regions):
        if all(finding.end <= k.start or finding.start >= k.end for k in kept):
            kept.append(finding)
    return sorted(kept, key=lambda f: f.start)


def redact(text: str, findings: list[Finding] | None = None) -> tuple[str, list[Finding]]:
    """``(redacted text, findings)``: every finding replaced by its placeholder.

    ``findings``: the result of :func:`detect` on ``text`` when the caller has it already.
    """
    if findings is None:
        findings = detect(text)
    parts: list[str] = []
    position = 0
    for finding in findings:
        parts.append(text[position:finding.start])
        parts.append(PLACEHOLDERS[finding.type])
        position = finding.end
    parts.append(text[position:])
    return "".join(parts), findings
