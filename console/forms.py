"""Console forms. They only shape input; validation that matters (policies, settings, layer
identifiers) is the services' and its errors are shown on the form."""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms
from django.forms import BoundField

from governance.models import PiiHandling, Policy
from memories.models import Kind
from memory_project.errors import MemoryServiceError, QueryTooLong
from summaries.config import DEFAULT_BATCH_WINDOW_SECONDS
from summaries.context import DEFAULT_BUDGET, MAX_BUDGET, MIN_BUDGET
from summaries.models import Depth
from tenants.layers import IDENTIFIER_FIELDS, Layer

LAYER_CHOICES = [(x.value, x.value) for x in Layer]
MODES = [("hybrid", "hybrid"), ("semantic", "semantic"), ("keyword", "keyword"),
         ("recall", "recall (composite score)")]


def _lines(value: str) -> list[str]:
    return [line.strip() for line in (value or "").splitlines() if line.strip()]


class SearchForm(forms.Form):
    """The memory explorer's search box: query, mode and the layer identifiers."""

    query = forms.CharField(max_length=2000)
    mode = forms.ChoiceField(choices=MODES, initial="hybrid")
    layers = forms.MultipleChoiceField(choices=LAYER_CHOICES, required=False,
                                       widget=forms.CheckboxSelectMultiple,
                                       help_text="none: every layer the identifiers reach")
    threshold = forms.FloatField(required=False, min_value=0, max_value=1,
                                 help_text="similarity; empty: the tenant's default")
    limit = forms.IntegerField(min_value=1, max_value=100, initial=10, required=False)
    scope = forms.CharField(required=False, max_length=100)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in IDENTIFIER_FIELDS:
            self.fields[name] = forms.CharField(required=False, max_length=255, label=name)

    def clean_limit(self) -> int:
        return self.cleaned_data.get("limit") or 10

    def identifiers(self) -> dict[str, str]:
        """The identifiers filled in, camelCase."""
        return {k: self.cleaned_data[k] for k in IDENTIFIER_FIELDS if self.cleaned_data.get(k)}


class MemoryEditForm(forms.Form):
    """Content, metadata (a JSON object, replaced whole) and the scalar fields of a memory.
    New content is checked by the tenant's policies and re-embedded when saved; a form
    without a ``content`` field leaves the content as it is."""

    content = forms.CharField(required=False, strip=False,
                              widget=forms.Textarea(attrs={"rows": 4}))
    metadata = forms.JSONField(required=False, widget=forms.Textarea(attrs={"rows": 6}))
    kind = forms.ChoiceField(choices=Kind.choices)
    scope = forms.CharField(max_length=100)
    importance = forms.FloatField(min_value=0, max_value=1)
    confidence = forms.FloatField(min_value=0, max_value=1)
    sensitive = forms.BooleanField(required=False)
    private = forms.BooleanField(required=False)
    version = forms.IntegerField(widget=forms.HiddenInput)

    def clean_content(self) -> str | None:
        """The new content, or ``None`` when the form did not send the field."""
        if "content" not in self.data:
            return None
        value = self.cleaned_data.get("content") or ""
        if not value.strip():
            raise forms.ValidationError("Content cannot be empty: delete the memory instead.")
        return value

    def clean_metadata(self) -> dict[str, Any]:
        value = self.cleaned_data.get("metadata") or {}
        if not isinstance(value, dict):
            raise forms.ValidationError("Metadata must be a JSON object.")
        return value

    def fields_patch(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {k: data[k] for k in ("kind", "scope", "importance", "confidence", "sensitive",
                                     "private")}


class PolicyForm(forms.Form):
    """A policy definition; lists are one entry per line. Checked by
    ``governance.policies.clean_policy_data`` when tried and when saved."""

    name = forms.CharField(max_length=200, required=False)
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    enabled = forms.BooleanField(required=False, initial=True)
    denied_terms = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                                   help_text="one word or phrase per line")
    denied_patterns = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}),
                                      help_text="one regular expression per line")
    pii_handling = forms.ChoiceField(choices=PiiHandling.choices, label="PII handling")
    max_content_length = forms.IntegerField(required=False, min_value=1)
    writable_layers = forms.MultipleChoiceField(choices=LAYER_CHOICES, required=False,
                                                widget=forms.CheckboxSelectMultiple,
                                                help_text="none: every layer")
    required_metadata = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}),
                                        help_text="one metadata key per line")
    api_key_prefixes = forms.CharField(required=False, label="API key prefixes",
                                       widget=forms.Textarea(attrs={"rows": 2}),
                                       help_text="one key prefix per line; none: every key")
    sample_text = forms.CharField(required=False, label="Sample text",
                                  widget=forms.Textarea(attrs={"rows": 4}))
    sample_layer = forms.ChoiceField(choices=LAYER_CHOICES, initial="user", label="Sample layer")
    sample_metadata = forms.CharField(required=False, label="Sample metadata",
                                      widget=forms.Textarea(attrs={"rows": 2}),
                                      help_text="a JSON object; empty: {}")

    @classmethod
    def initial_from(cls, policy: Policy) -> dict[str, Any]:
        """Initial values showing a saved policy."""
        return {
            "name": policy.name, "description": policy.description, "enabled": policy.enabled,
            "denied_terms": "\n".join(policy.denied_terms),
            "denied_patterns": "\n".join(policy.denied_patterns),
            "pii_handling": policy.pii_handling,
            "max_content_length": policy.max_content_length,
            "writable_layers": policy.writable_layers,
            "required_metadata": "\n".join(policy.required_metadata),
            "api_key_prefixes": "\n".join(policy.api_key_prefixes),
        }

    def policy_data(self) -> dict[str, Any]:
        """The definition in the services' shape."""
        data = self.cleaned_data
        return {
            "name": data["name"], "description": data["description"],
            "enabled": data["enabled"],
            "denied_terms": _lines(data["denied_terms"]),
            "denied_patterns": _lines(data["denied_patterns"]),
            "pii_handling": data["pii_handling"],
            "max_content_length": data["max_content_length"],
            "writable_layers": list(data["writable_layers"]),
            "required_metadata": _lines(data["required_metadata"]),
            "api_key_prefixes": _lines(data["api_key_prefixes"]),
        }

    def clean_sample_metadata(self) -> dict[str, Any]:
        raw = (self.cleaned_data.get("sample_metadata") or "").strip()
        try:
            value = json.loads(raw) if raw else {}
        except ValueError:
            raise forms.ValidationError("Sample metadata must be JSON.") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("Sample metadata must be a JSON object.")
        return value


class ReviewDecisionForm(forms.Form):
    """Approve or reject one or more review items; a rejection needs a reason."""

    items = forms.MultipleChoiceField(choices=[], required=True)
    decision = forms.ChoiceField(choices=[("approve", "approve"), ("reject", "reject")])
    reason = forms.CharField(required=False, max_length=2000)

    def __init__(self, *args: Any, item_ids: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        items = self.fields["items"]
        assert isinstance(items, forms.MultipleChoiceField)
        items.choices = [(i, i) for i in item_ids]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("decision") == "reject" and not (data.get("reason") or "").strip():
            raise forms.ValidationError("A rejection needs a reason.")
        return data


class SettingsForm(forms.Form):
    """Retrieval and lifecycle settings of a tenant (``memories.services.settings``)."""

    default_threshold = forms.FloatField(min_value=0, max_value=1,
                                         label="Default search threshold")
    recency_half_life_days = forms.FloatField(min_value=0.001, label="Recency half-life (days)")
    weights_scope = forms.CharField(required=False, max_length=100, label="Scope",
                                    help_text="set recall weights for this scope "
                                              "(default: every scope without its own)")
    weight_relevance = forms.FloatField(required=False, min_value=0, label="relevance")
    weight_importance = forms.FloatField(required=False, min_value=0, label="importance")
    weight_recency = forms.FloatField(required=False, min_value=0, label="recency")
    weight_confidence = forms.FloatField(required=False, min_value=0, label="confidence")
    decay_enabled = forms.BooleanField(required=False, label="Decay enabled")
    decay_rate = forms.FloatField(min_value=0, max_value=1, label="Decay rate per day")
    decay_archive_threshold = forms.FloatField(min_value=0, max_value=1,
                                               label="Archive below relevance")
    deleted_retention_days = forms.FloatField(min_value=0.001,
                                              label="Keep soft-deleted memories (days)")
    cleanup_auto_delete = forms.BooleanField(required=False,
                                             label="Delete session memories when closed")
    cleanup_retention = forms.CharField(max_length=20, label="Close sessions idle for",
                                        help_text="e.g. 7d, 12h, 30m")
    cleanup_promote = forms.BooleanField(required=False,
                                         label="Promote important session memories")
    cleanup_promotion_threshold = forms.FloatField(min_value=0, max_value=1,
                                                   label="Promotion importance threshold")
    promotion_target = forms.ChoiceField(
        required=False, label="Promote to layer",
        choices=[("", "project if named, else user")] + [
            (x, x) for x in ("user", "project", "team", "org", "company")])

    WEIGHTS = ("relevance", "importance", "recency", "confidence")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        given = [data.get(f"weight_{w}") is not None for w in self.WEIGHTS]
        if any(given) and not all(given):
            raise forms.ValidationError("Give all four recall weights, or none.")
        return data


class AuditFilterForm(forms.Form):
    """Filters of the audit log page: action, actor (substring) and a date range (UTC days,
    ``until`` included)."""

    action = forms.ChoiceField(required=False, choices=[("", "any action")])
    actor = forms.CharField(required=False, max_length=200,
                            help_text="part of the actor, e.g. alice or api_key:")
    since = forms.DateField(required=False, label="From",
                            widget=forms.DateInput(attrs={"type": "date"}))
    until = forms.DateField(required=False, label="To",
                            widget=forms.DateInput(attrs={"type": "date"}))

    def __init__(self, *args: Any, actions: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["action"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [("", "any action"), *((a, a) for a in actions)]

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            raise forms.ValidationError("From must not be after To.")
        return data


class ContextPreviewForm(forms.Form):
    """The context preview: the seven identifiers, an optional query, a token budget and an
    optional depth. Ranges are checked by ``summaries.context.ContextRequest`` and its
    errors shown on the form, as an agent would get them."""

    query = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}),
                            help_text="empty: the most important memories of each layer")
    budget = forms.IntegerField(required=False, initial=DEFAULT_BUDGET,
                                help_text=f"tokens, {MIN_BUDGET}..{MAX_BUDGET}")
    depth = forms.CharField(required=False, widget=forms.Select(choices=[
        ("", "the deepest that fits"), *((d, d) for d in Depth.values)]))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for name in IDENTIFIER_FIELDS:
            self.fields[name] = forms.CharField(required=False, max_length=255, label=name)

    def clean_budget(self) -> int:
        """The budget typed, or the default (2000) when left blank."""
        budget = self.cleaned_data.get("budget")
        return DEFAULT_BUDGET if budget is None else int(budget)

    def identifiers(self) -> dict[str, str]:
        """The identifiers filled in, camelCase."""
        return {k: self.cleaned_data[k] for k in IDENTIFIER_FIELDS if self.cleaned_data.get(k)}

    def show_error(self, err: MemoryServiceError) -> None:
        """Show a service error beside the field it names (``details.field``, the query for
        a query too long, an identifier its message starts with), else above the form."""
        name = err.details.get("field")
        if isinstance(err, QueryTooLong) or str(err.message).startswith("query "):
            name = "query"
        elif name not in self.fields:
            name = next((f for f in IDENTIFIER_FIELDS if err.message.startswith(f)), None)
        self.add_error(name if name in self.fields else None, err.message)


#: Rows of the summary trigger form: the ``default`` entry, then each layer.
SUMMARY_LAYERS = ("default", *(x.value for x in Layer))
#: Columns of the summary trigger form (``summaries.layers.<layer>.<key>``).
TRIGGER_KEYS = ("updateInterval", "skipIfUnchanged", "updateOnChanges", "depths", "maxAge",
                "personalize", "enabled")
_YES_NO = [("", "—"), ("true", "yes"), ("false", "no")]
_PERSONALIZE = [("", "—"), ("none", "no"), ("user", "user"), ("session", "session")]
_SETTING_NAME = re.compile(r"summaries\.(?:layers\.([A-Za-z]+)\.)?([A-Za-z]+)")


def _trigger_field(key: str) -> forms.Field:
    if key in ("skipIfUnchanged", "enabled"):
        return forms.CharField(required=False, widget=forms.Select(choices=_YES_NO))
    if key == "personalize":
        return forms.CharField(required=False, widget=forms.Select(choices=_PERSONALIZE))
    size = 20 if key == "depths" else 8
    return forms.CharField(required=False, max_length=100,
                           widget=forms.TextInput(attrs={"size": size}))


def _setting_value(key: str, text: str) -> Any:
    """A form cell as its JSON value; what does not convert stays text, for the section's
    own check to refuse by name."""
    if key in ("skipIfUnchanged", "enabled"):
        return {"true": True, "false": False}.get(text, text)
    if key == "personalize":
        return None if text == "none" else text
    if key == "depths":
        return [d for d in re.split(r"[,\s]+", text) if d]
    try:
        return int(text)
    except ValueError:
        return text


def _setting_text(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if key == "personalize" and value is None:
        return "none"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)


class SummaryTriggersForm(forms.Form):
    """When each layer's summaries are regenerated (the tenant settings' ``summaries``
    section, ``summaries.config``): one row per layer plus ``default``; a blank cell
    inherits (a layer from ``default``, ``default`` from the built-in values). Values are
    checked by the section's own parser; its error is shown beside the cell it names."""

    batchWindowSeconds = forms.CharField(required=False, max_length=20,
                                         label="Batch window (seconds)",
                                         widget=forms.TextInput(attrs={"size": 8}))

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for layer in SUMMARY_LAYERS:
            for key in TRIGGER_KEYS:
                field = _trigger_field(key)
                field.widget.attrs["aria-label"] = f"{layer} {key}"
                self.fields[f"{layer}__{key}"] = field

    @staticmethod
    def initial_from(stored: Any) -> dict[str, str]:
        """Initial cells for the stored ``summaries`` section (as saved, not parsed: a
        value a layer inherits stays blank)."""
        stored = stored if isinstance(stored, dict) else {}
        initial = {"batchWindowSeconds": str(stored.get(
            "batchWindowSeconds", DEFAULT_BATCH_WINDOW_SECONDS))}
        layers = stored.get("layers")
        for layer, values in (layers.items() if isinstance(layers, dict) else ()):
            for key, value in (values.items() if isinstance(values, dict) else ()):
                if layer in SUMMARY_LAYERS and key in TRIGGER_KEYS:
                    initial[f"{layer}__{key}"] = _setting_text(key, value)
        return initial

    def rows(self) -> list[tuple[str, list[BoundField]]]:
        """``[(layer, [bound field per key])]`` for the table."""
        return [(layer, [self[f"{layer}__{key}"] for key in TRIGGER_KEYS])
                for layer in SUMMARY_LAYERS]

    def section(self) -> dict[str, Any]:
        """The ``summaries`` patch: ``batchWindowSeconds`` (blank: the built-in 300) and the
        whole ``layers`` object (replacing the stored one; ``budget`` is left as it is)."""
        data = self.cleaned_data
        window = (data.get("batchWindowSeconds") or "").strip()
        layers: dict[str, dict[str, Any]] = {}
        for layer in SUMMARY_LAYERS:
            for key in TRIGGER_KEYS:
                text = (data.get(f"{layer}__{key}") or "").strip()
                if text:
                    layers.setdefault(layer, {})[key] = _setting_value(key, text)
        return {"batchWindowSeconds": _setting_value("batchWindowSeconds", window)
                if window else DEFAULT_BATCH_WINDOW_SECONDS, "layers": layers}

    def show_error(self, message: str) -> None:
        """Show the section's error beside the cell it names, else above the table."""
        found = _SETTING_NAME.search(message)
        name = None
        if found:
            layer, key = found.groups()
            name = f"{layer}__{key}" if layer else key
        self.add_error(name if name in self.fields else None, message)
