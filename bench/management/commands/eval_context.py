"""``manage.py eval_context --tenant T --file F --budgets 500,1000,2000 [--generate]
[--limit-questions N] [--json]``: LoCoMo evidence in assembled contexts against plain top-k
memories at the same token budget (``bench.context_eval``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from bench.context_eval import evaluate, report_lines
from memory_project.errors import MemoryServiceError
from summaries.context import MAX_BUDGET, MIN_BUDGET, SUMMARY_SHARE
from tenants.management.commands.create_api_key import find_tenant
from tenants.services import system_context


def parse_budgets(value: str) -> list[int]:
    """``"500,1000"`` → ``[500, 1000]`` (sorted, distinct).

    Raises:
        CommandError: not integers, or one outside the context's budget range.
    """
    try:
        budgets = sorted({int(b) for b in value.split(",") if b.strip()})
    except ValueError:
        raise CommandError("--budgets must be comma-separated integers, e.g. 500,1000") from None
    if not budgets or budgets[0] < MIN_BUDGET or budgets[-1] > MAX_BUDGET:
        raise CommandError(f"--budgets values must be within {MIN_BUDGET}..{MAX_BUDGET}")
    return budgets


class Command(BaseCommand):
    help = ("Share of LoCoMo questions whose evidence an assembled context holds, against "
            "plain top-k memories at the same token budget.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tenant", required=True, help="tenant slug, name or id")
        parser.add_argument("--file", required=True, type=Path, help="a LoCoMo-format file")
        parser.add_argument("--budgets", default="500,1000,2000",
                            help="comma-separated token budgets")
        parser.add_argument("--generate", action="store_true",
                            help="regenerate every conversation's summaries first")
        parser.add_argument("--limit-questions", type=int, default=None,
                            help="ask at most this many questions per conversation")
        parser.add_argument("--summary-share", type=float, default=SUMMARY_SHARE,
                            help="share of the budget summaries may take (context default)")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        budgets = parse_budgets(options["budgets"])
        limit = options["limit_questions"]
        if limit is not None and limit < 1:
            raise CommandError("--limit-questions must be at least 1")
        ctx = system_context(find_tenant(options["tenant"]), "eval_context")
        try:
            report = evaluate(ctx, options["file"], budgets, generate=options["generate"],
                              limit_questions=limit, summary_share=options["summary_share"],
                              progress=None if options["json"] else self.stderr._out)
        except MemoryServiceError as err:
            raise CommandError(err.message) from None
        if options["json"]:
            self.stdout.write(json.dumps(report))
            return
        for line in report_lines(report):
            self.stdout.write(line)
