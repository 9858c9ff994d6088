"""``manage.py train_reranker FILE --tenant T [--fold conv-26] [--out PATH]``: retrain hybrid
search's reranker (``memories/retrieval/reranker.json``) from LoCoMo questions.

The conversations must have been imported (``import_locomo``). ``--fold`` trains on the
named conversations only (comma-separated sample ids), for cross-fold figures with
``eval_locomo --reranker PATH --fold OTHER``; without it, every conversation of the file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from bench.commands import locomo_input
from bench.locomo import questions
from bench.reranker_training import L2, collect, describe, fit
from memories.retrieval.rerank import FEATURES, WEIGHTS_PATH
from tenants.entry import tenant_job


class Command(BaseCommand):
    help = "Retrain hybrid search's reranker from a LoCoMo file's questions and evidence."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", type=Path)
        parser.add_argument("--tenant", required=True, help="tenant slug, name or id")
        parser.add_argument("--fold", default="",
                            help="comma-separated sample ids to train on (default: all)")
        parser.add_argument("--out", type=Path, default=WEIGHTS_PATH,
                            help=f"where to write the weights (default: {WEIGHTS_PATH})")
        parser.add_argument("--l2", type=float, default=L2, help="L2 penalty")

    def handle(self, *args: Any, **options: Any) -> None:
        _tenant, ctx, samples = locomo_input(options["tenant"], options["file"],
                                             "train_reranker")
        wanted = [s for s in options["fold"].split(",") if s.strip()]
        chosen = [s for s in samples if not wanted or s["sample_id"] in wanted]
        if not chosen:
            raise CommandError(f"No conversation {', '.join(wanted)} in {options['file']}.")
        asked = [q for s in chosen for q in questions(s)]
        with tenant_job(ctx):
            examples = collect(ctx, tqdm(asked, desc="questions", unit="q",
                                         file=self.stderr._out))
        ids = [str(s["sample_id"]) for s in chosen]
        try:
            reranker = fit(examples, options["l2"],
                           describe(examples, ids, options["file"], options["l2"]))
        except ValueError as err:
            raise CommandError(str(err)) from None
        options["out"].write_text(json.dumps(reranker.to_json(), indent=1) + "\n",
                                  encoding="utf-8")
        weights = ", ".join(f"{n}={w:+.2f}" for n, w in zip(FEATURES, reranker.weights,
                                                            strict=True))
        self.stdout.write(f"{reranker.source}\n{weights}; intercept {reranker.intercept:+.2f}\n"
                          f"written to {options['out']}")
