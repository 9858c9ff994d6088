"""``manage.py llm_serve [--model NAME] [--port N]``: serve the local language model."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from llm.local_server import serve
from llm.weights import MODELS


class Command(BaseCommand):
    help = "Serve the packaged local model over an OpenAI-compatible API on 127.0.0.1."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--model", choices=sorted(MODELS), default=None,
                            help="default: LLM_LOCAL_MODEL")
        parser.add_argument("--port", type=int, default=None, help="default: LLM_LOCAL_PORT")

    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write("joining the model's weights (first run only) and loading it ...")
        self.stdout.flush()
        serve(model=options["model"], port=options["port"])
