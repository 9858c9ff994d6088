"""PII detection and redaction (seed 001 "PII Redaction"): a corpus of real PII that must be
replaced by its placeholder, and look-alikes (dates, times, versions, ids, amounts) that must
stay untouched. Pure functions: no database."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governance.pii import PLACEHOLDERS, detect, redact

POSITIVES = [
    # The seed's own examples.
    ("user@example.com", "EMAIL"),
    ("123-456-7890", "PHONE"),
    # Phones: international, national (US, GB), fictional 555 numbers, dotted, French.
    ("+1 (415) 555-2671", "PHONE"),
    ("+44 20 7946 0958", "PHONE"),
    ("020 7946 0958", "PHONE"),
    ("(555) 123-4567", "PHONE"),
    ("415.555.2671", "PHONE"),
    ("+33 1 42 68 53 00", "PHONE"),
    ("+49 30 901820", "PHONE"),
    # Emails with subdomains and plus-tags.
    ("jane.doe@mail.corp.example.co.uk", "EMAIL"),
    ("bob+newsletter@example.org", "EMAIL"),
    ("first_last-99@sub.domain.io", "EMAIL"),
    # IBAN, with and without spaces (mod-97 valid).
    ("DE89 3704 0044 0532 0130 00", "IBAN"),
    ("DE89370400440532013000", "IBAN"),
    ("GB82 WEST 1234 5698 7654 32", "IBAN"),
    # Cards passing Luhn, grouped by spaces, dashes, or not at all.
    ("4111 1111 1111 1111", "CARD"),
    ("4111-1111-1111-1111", "CARD"),
    ("4111111111111111", "CARD"),
    ("5500 0000 0000 0004", "CARD"),
    # IP addresses.
    ("192.168.1.10", "IP"),
    ("2001:db8::1", "IP"),
    ("fe80::1ff:fe23:4567:890a", "IP"),
]

NEGATIVES = [
    "on 2023-05-08 we met",
    "the call is at 10:30",
    "meeting 10:30-11:45 tomorrow",
    "at 12:30:45 sharp",
    "upgrade to version 1.2.3",
    "see v2.10.0 and 1.2.3.4.5",
    "order 12345678 shipped",
    "order #12345678 shipped",
    "ISBN 978-3-16-148410-0",
    "ISBN 9783161484100",
    "total 1,234,567.89 USD",
    "total 1.234.567,89 EUR",
    "number 4111111111111112 fails Luhn",
    "addr 10.0.0.256 is not an IP",
    "write to a@b about it",
    "in 2023 we had 150 people",
    "code 20231105",
    "pages 1234-5678",
    "from 2019-2023",
    "on 08.05.2023 in Berlin",  # a German date, not a German phone number
    "on 12/31/2023 and 2023/05/08",
    "invoice 2023-000123",
    "PO 4500012345",  # possible in the US, but not valid and not written as a phone
    "ticket 555-1234",  # a 7-digit local number without area code: too id-like to redact
    "room 2001:2002",
    "timestamp 2023-05-08T10:30:00Z",
    "ZIP 94105",
    # Left out as genuinely ambiguous: "10.2.3.4" (a four-part version or an IPv4 address),
    # "1234567890" and "4155552671" (an unformatted 10-digit run is an id or a US phone),
    # "SSN 123-45-6789" (PII, but not a type this detector claims to find).
]


@pytest.mark.parametrize(("pii", "kind"), POSITIVES)
def test_it_redacts_pii_in_context(pii: str, kind: str) -> None:
    text = f"Contact: {pii}, thanks."
    redacted, findings = redact(text)
    assert redacted == f"Contact: {PLACEHOLDERS[kind]}, thanks."
    assert [f.type for f in findings] == [kind]
    assert text[findings[0].start:findings[0].end] == pii


@pytest.mark.parametrize(("pii", "kind"), POSITIVES)
def test_it_redacts_pii_alone(pii: str, kind: str) -> None:
    assert redact(pii)[0] == PLACEHOLDERS[kind]


@pytest.mark.parametrize("text", NEGATIVES)
def test_it_leaves_look_alikes_untouched(text: str) -> None:
    assert detect(text) == []
    assert redact(text) == (text, [])


def test_it_uses_the_seed_placeholders() -> None:
    text = "Mail user@example.com or call 123-456-7890."
    assert redact(text)[0] == "Mail [REDACTED_EMAIL] or call [REDACTED_PHONE]."


def test_it_redacts_several_kinds_in_one_text_in_order() -> None:
    text = ("Jane (jane+work@example.com, +44 20 7946 0958) paid with 4111 1111 1111 1111 "
            "from DE89 3704 0044 0532 0130 00 via 192.168.1.10 on 2023-05-08 at 10:30.")
    redacted, findings = redact(text)
    assert redacted == ("Jane ([REDACTED_EMAIL], [REDACTED_PHONE]) paid with [REDACTED_CARD] "
                        "from [REDACTED_IBAN] via [REDACTED_IP] on 2023-05-08 at 10:30.")
    assert [f.type for f in findings] == ["EMAIL", "PHONE", "CARD", "IBAN", "IP"]
    assert [f.start for f in findings] == sorted(f.start for f in findings)


def test_it_does_not_read_digits_inside_an_email_as_a_phone() -> None:
    redacted, findings = redact("write to 4155552671@example.com")
    assert redacted == "write to [REDACTED_EMAIL]"
    assert [f.type for f in findings] == ["EMAIL"]


def test_it_is_idempotent() -> None:
    once, _ = redact("user@example.com 123-456-7890 4111 1111 1111 1111 2001:db8::1")
    assert redact(once) == (once, [])


def test_it_keeps_text_without_pii_byte_for_byte() -> None:
    text = "  Ünïcödé\tline\nversion 1.2.3 on 2023-05-08 at 10:30 — 1,234,567.89  "
    assert redact(text) == (text, [])


@pytest.mark.parametrize(("text", "expected"), [
    ("card 4111 1111 1111 1111 12/25", "card [REDACTED_CARD] 12/25"),
    ("card 4111 1111 1111 1111 exp 12 25", "card [REDACTED_CARD] exp 12 25"),
    ("call 123-456-7890 4111 1111 1111 1111", "call [REDACTED_PHONE] [REDACTED_CARD]"),
    ("amex 3782 822463 10005", "amex [REDACTED_CARD]"),
])
def test_it_finds_a_card_next_to_other_digits(text: str, expected: str) -> None:
    assert redact(text)[0] == expected


# --- the phone matcher runs on windows around digits only -------------------------------

def _phones_on_whole_text(text: str, regions: tuple[str, ...]) -> list[tuple[int, int]]:
    """The reference: libphonenumber's matcher over the whole text, as before windows."""
    import re

    import phonenumbers

    from governance.pii import _usual_grouping

    spans = []
    for region in regions:
        for m in phonenumbers.PhoneNumberMatcher(
                text, region, leniency=phonenumbers.Leniency.STRICT_GROUPING):
            spans.append((m.start, m.end))
    usual = _usual_grouping(regions[0])
    for m in phonenumbers.PhoneNumberMatcher(text, regions[0],
                                             leniency=phonenumbers.Leniency.POSSIBLE):
        groups = re.findall(r"\d+", m.raw_string)
        if len(groups) == len(usual) + 1 and groups[0] == str(m.number.country_code):
            groups = groups[1:]
        if [len(g) for g in groups] == usual:
            spans.append((m.start, m.end))
    return spans


_PIECES = ["call ", "+1 (415) 555-2671", "020 7946 0958", " ext. 12", "x", "(", ")", "-",
           ".", " ", "  ", "Tel:", "2023-000123", "08.05.2023", "123-456-7890", "+49 30 901820",
           "abc", "\n", "555", "0123", "#4", "42", "+", "/"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES) | st.text("0123456789 -.()+x", max_size=12),
                max_size=40))
def test_windows_find_what_the_whole_text_finds(pieces: list[str]) -> None:
    from governance.pii import _phones

    text = "".join(pieces)
    regions = ("US", "GB", "DE", "FR")
    assert [(f.start, f.end) for f in _phones(text, regions)] == \
        _phones_on_whole_text(text, regions)


def test_windows_skip_prose_between_numbers() -> None:
    from governance.pii import phone_windows

    text = "word " * 200 + "call 020 7946 0958 now" + " word" * 200
    [(start, end)] = phone_windows(text)
    assert end - start < 80 and "020 7946 0958" in text[start:end]
