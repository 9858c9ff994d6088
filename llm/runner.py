"""Running a purpose for a tenant: the budget, the cache, privacy, the model, one repair
retry, the offline fallback, and the usage row — the same for every purpose.

1. ``LLM_OFFLINE`` (or no model configured): the offline fallback answers.
2. The tenant's budget for the period (``llm.budgets``): spent → the purpose's fallback, or
   ``BUDGET_EXCEEDED`` for purposes that must not silently degrade (summaries).
3. A remote model (``LLM_BASE_URL`` not on this machine) gets the input PII-redacted when the
   tenant has a policy that redacts or denies PII (``llm.privacy``).
4. An identical request's answer is reused (``llm.cache``).
5. The model (``llm.client.chat_json``); invalid output gets one repair retry that quotes
   the error; a second invalid output, a timeout, a refusal, an open circuit or an
   unreachable model → the offline fallback (seed 001 MR-H2 "LLM Failure Fallback"),
   logged with the error.
6. One ``LlmUsage`` row (tokens, dollars, outcome) and the ``llm_*`` metrics per call.

Must not run in a web worker (``LLM_FORBIDDEN_IN_WEB``): model calls take seconds, so the
callers are Celery tasks and commands.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from llm import cache, client, config
from llm.budgets import BudgetExceeded, budget_check, cache_ttl
from llm.models import Outcome
from llm.privacy import redaction_for
from llm.purposes.base import InvalidOutput, Purpose
from llm.services import usage_record
from memory_project.env import web_process
from memory_project.errors import MemoryServiceError
from tenants.context import TenantContext

logger = logging.getLogger(__name__)
R = TypeVar("R")

@dataclass(frozen=True)
class Result(Generic[R]):
    """A purpose's answer and where it came from."""

    value: R
    model: str
    outcome: str  # llm.models.Outcome

    @property
    def fallback(self) -> bool:
        """Whether the offline fallback answered."""
        return self.outcome in (Outcome.FALLBACK, Outcome.BUDGET)


def _fallback(ctx: TenantContext, purpose: Purpose[Any, R], payload: Any, layer: str | None,
              outcome: str) -> Result[R]:
    model = f"offline:{purpose.fallback_name}"
    started = time.perf_counter()
    value = purpose.fallback(payload)
    usage_record(ctx, purpose=purpose.name, model=model, outcome=outcome, layer=layer,
                 latency_ms=(time.perf_counter() - started) * 1000)
    return Result(value=value, model=model, outcome=outcome)


def run(ctx: TenantContext, purpose: Purpose[Any, R], payload: Any, *,
        layer: str | None = None) -> Result[R]:
    """Answer ``purpose`` for ``payload`` on behalf of ``ctx``'s tenant (module docstring).

    Raises:
        BudgetExceeded: the budget is spent and the purpose does not fall back.
        RuntimeError: called in a web worker.
    """
    if web_process():
        raise RuntimeError("language-model calls belong in Celery tasks or commands, "
                           "not in a web worker")
    if config.offline():
        return _fallback(ctx, purpose, payload, layer, Outcome.FALLBACK)
    model = config.model_for(purpose.name, layer)
    try:
        budget_check(ctx, purpose=purpose.name)
    except BudgetExceeded:
        if not purpose.fallback_on_budget:
            usage_record(ctx, purpose=purpose.name, model=model, outcome=Outcome.BUDGET,
                         layer=layer)
            raise
        return _fallback(ctx, purpose, payload, layer, Outcome.BUDGET)
    if config.is_remote():
        redact = redaction_for(ctx)
        if redact is not None:
            payload = purpose.redacted(payload, redact)
    generation = cache.generation(ctx.tenant_id)
    key = None if generation is None else cache.cache_key(
        ctx.tenant_id, generation, purpose.name, model, purpose.version,
        purpose.cache_identity(payload))
    hit = cache.get(key) if key else None
    if hit is not None:
        usage_record(ctx, purpose=purpose.name, model=model, outcome=Outcome.CACHED, layer=layer)
        return Result(value=purpose.load(hit), model=model, outcome=Outcome.CACHED)
    try:
        value, outcome, tokens, latency = ask_model(purpose, payload, model)
    except (MemoryServiceError, InvalidOutput) as err:
        logger.warning("llm %s failed (%s), answering offline: %s", purpose.name, model, err)
        return _fallback(ctx, purpose, payload, layer, Outcome.FALLBACK)
    cost = config.cost_of(model, *tokens)
    usage_record(ctx, purpose=purpose.name, model=model, outcome=outcome, layer=layer,
                 prompt_tokens=tokens[0], completion_tokens=tokens[1], cost=cost,
                 latency_ms=latency)
    if key:
        cache.put(key, purpose.dump(value), cache_ttl(ctx))
    return Result(value=value, model=model, outcome=outcome)


def ask_model(purpose: Purpose[Any, R], payload: Any, model: str
              ) -> tuple[R, str, tuple[int, int], float]:
    """Ask the model once (plus one repair retry) without cache, budget or usage row: the
    accepted answer as ``(value, outcome, (prompt, completion) tokens, ms)``.

    Raises:
        InvalidOutput: invalid twice. MemoryServiceError: the call failed.
    """
    messages = purpose.messages(payload)
    schema = purpose.schema()
    timeout = config.timeout_for(purpose.name)
    operation = f"llm.{purpose.name}"
    reply = client.chat_json(model, messages, schema=schema, max_tokens=purpose.max_tokens,
                             timeout=timeout, operation=operation)
    tokens = [reply.prompt_tokens, reply.completion_tokens]
    latency = reply.latency_ms
    try:
        return (_accept(purpose, payload, reply.text), Outcome.OK, (tokens[0], tokens[1]),
                latency)
    except InvalidOutput as err:
        repair = [*messages, {"role": "assistant", "content": reply.text[:4000]},
                  {"role": "user", "content": f"That answer is not valid: {err}. Answer "
                                              "again with JSON that follows the schema."}]
        second = client.chat_json(model, repair, schema=schema, max_tokens=purpose.max_tokens,
                                  timeout=timeout, operation=operation)
        tokens[0] += second.prompt_tokens
        tokens[1] += second.completion_tokens
        return (_accept(purpose, payload, second.text), Outcome.REPAIRED,
                (tokens[0], tokens[1]), latency + second.latency_ms)


def _accept(purpose: Purpose[Any, R], payload: Any, text: str) -> R:
    try:
        data = client.parse_json(text)
    except ValueError as err:
        raise InvalidOutput(f"not JSON ({err})") from None
    return purpose.accept(payload, purpose.parse(data))

