"""``manage.py ingest_locomo FILE --tenant T``: LoCoMo conversations through conversation
ingestion, session by session, as an agent platform would feed them.

Each conversation is a project (``projectId`` = ``sample_id``); each session is one
ingestion (``agents.conversations.conversation_ingest``, run in this process: the configured
language model, else the offline fallback), its turns as ``user`` messages named after the
speaker, with the session's date and the turn's ``dia_id`` as message id. Prints turns fed,
memories stored per turn, supersessions and known facts; ``eval_locomo`` then measures
answer-evidence coverage on what was stored (a memory counts for every turn it cites). Use a
tenant without imported turns, or the two mix.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from tqdm import tqdm

from agents.conversations import ConversationMessage, conversation_ingest
from bench.commands import locomo_input
from bench.locomo import Turn, turns
from bench.peers.locomo_format import session_time
from memories.models import Memory, State
from tenants.entry import tenant_job
from tenants.layers import LayerIdentifiers
from tenants.services import project_get_or_create


def sessions(sample: dict[str, Any]) -> list[list[Turn]]:
    """The conversation's turns grouped by session, in order."""
    grouped: dict[int, list[Turn]] = {}
    for turn in turns(sample):
        grouped.setdefault(turn.session, []).append(turn)
    return [grouped[number] for number in sorted(grouped)]


class Command(BaseCommand):
    help = "Feed LoCoMo conversations session by session through conversation ingestion."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--tenant", required=True, help="tenant slug, name or id")

    def handle(self, *args: Any, **options: Any) -> None:
        _, ctx, samples = locomo_input(options["tenant"], options["file"], "ingest_locomo")
        totals = {"turns": 0, "added": 0, "superseded": 0, "known": 0, "refused": 0}
        fallback = False
        started = time.perf_counter()
        for sample in samples:
            sample_id = str(sample["sample_id"])
            identifiers = LayerIdentifiers(projectId=sample_id)
            with tenant_job(ctx):
                project_get_or_create(ctx, external_id=sample_id, name=f"LoCoMo {sample_id}")
            grouped = sessions(sample)
            bar = tqdm(grouped, desc=sample_id, unit="session", file=self.stderr._out)
            for session in bar:
                when = session_time(session[0].session_date) or datetime.now(UTC)
                messages = [ConversationMessage(role="user", name=t.speaker, content=(
                    t.text + (f" [shares an image: {t.image_caption}]" if t.image_caption
                              else ""))[:4000], at=when, id=t.dia_id) for t in session]
                with tenant_job(ctx):
                    outcome = conversation_ingest(ctx, messages=messages, layer="project",
                                                  identifiers=identifiers, reference_time=when)
                totals["turns"] += len(session)
                for key, value in outcome.counts().items():
                    if key == "fallback":
                        fallback = fallback or bool(value)
                    else:
                        totals[key] += int(value)
            bar.close()
        with tenant_job(ctx):
            active = Memory.objects.filter(
                layer="project", state=State.ACTIVE,
                project_id__in=[str(s["sample_id"]) for s in samples]).count()
        seconds = time.perf_counter() - started
        per_turn = active / totals["turns"] if totals["turns"] else 0.0
        self.stdout.write(
            f"fed {totals['turns']} turns of {len(samples)} conversations in {seconds:.1f} s "
            f"({'offline fallback' if fallback else 'language model'}): added "
            f"{totals['added']}, superseded {totals['superseded']}, known {totals['known']}, "
            f"refused {totals['refused']}; {active} active memories, {per_turn:.2f} per turn")
