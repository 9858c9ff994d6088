"""``manage.py memory_agent inject|extract|run ...``: the ``memory-agent`` command (package
``clients/python``), for a deployment that runs agents beside the service. It talks to the
service over HTTP with an API key like the standalone command, so both behave the same."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "memory-agent inject | extract | run (see `memory-agent --help`)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("args", nargs="*", help="memory-agent's own arguments")

    def run_from_argv(self, argv: list[str]) -> None:
        from memory_client.agent_cli import main

        raise SystemExit(main(argv[2:]))

    def handle(self, *args: Any, **options: Any) -> None:
        from memory_client.agent_cli import main

        status = main(list(args))
        if status:
            raise SystemExit(status)
