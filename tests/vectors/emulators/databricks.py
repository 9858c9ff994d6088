"""Databricks Vector Search and SQL Statement Execution as documented (fixtures in
``fixtures/databricks``): Delta tables, Delta Sync indexes that follow them on ``sync``."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

from tests.vectors.fixture_server import FixtureServer, Reply, Request, VectorStore, fixture

V = "databricks"
NAME = r"`(?P<c>\w+)`\.`(?P<s>\w+)`\.`(?P<t>\w+)`"


def evaluate(filters: dict[str, Any], row: dict[str, Any]) -> bool:
    """Databricks' ``filters_json``: ``{"col": value}`` equality, ``{"col": [..]}`` any of."""
    for key, wanted in filters.items():
        if isinstance(wanted, list):
            if row.get(key) not in wanted:
                return False
        elif row.get(key) != wanted:
            return False
    return True


def _words(text: str) -> set[str]:
    return set(re.findall(r"\w+", text.lower()))


class DatabricksEmulator(FixtureServer):
    """Endpoint ``memory-endpoint`` (ONLINE) and a warehouse; ``statements`` lists the SQL
    it ran."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, dict[str, dict[str, Any]]] = {}
        self.schemas: set[str] = set()
        self.grants: list[str] = []
        self.statements: list[str] = []
        self.indexes: dict[str, dict[str, Any]] = {}
        self.synced = VectorStore()
        base = "/api/2.0/vector-search"
        self.route("GET", base + r"/endpoints/(?P<name>[^/]+)", self.endpoint)
        self.route("POST", base + r"/indexes", self.create_index,
                   fixture(V, "create_index_request"))
        self.route("GET", base + r"/indexes/(?P<name>[^/]+)", self.get_index)
        self.route("POST", base + r"/indexes/(?P<name>[^/]+)/sync", self.sync)
        self.route("POST", base + r"/indexes/(?P<name>[^/]+)/query", self.query,
                   fixture(V, "query_request"))
        self.route("GET", base + r"/indexes/(?P<name>[^/]+)/query", self.query)
        self.route("POST", base + r"/indexes/(?P<name>[^/]+)/scan", self.scan,
                   fixture(V, "scan_request"))
        self.route("POST", r"/api/2.0/sql/statements/?", self.statement,
                   fixture(V, "statement_request"))

    def endpoint(self, request: Request, match: re.Match[str]) -> Reply:
        if match["name"] != "memory-endpoint":
            return Reply(404, fixture(V, "not_found_response"))
        return Reply(200, fixture(V, "endpoint_response"))

    def create_index(self, request: Request, match: re.Match[str]) -> Reply:
        spec = request.body["delta_sync_index_spec"]
        if spec["source_table"] not in self.tables:
            return Reply(400, {"error_code": "INVALID_PARAMETER_VALUE",
                               "message": "Source table does not exist."})
        body = fixture(V, "index_response")
        body.update(name=request.body["name"], endpoint_name=request.body["endpoint_name"])
        body["delta_sync_index_spec"].update(source_table=spec["source_table"],
                                             pipeline_type=spec["pipeline_type"])
        self.indexes[request.body["name"]] = body
        return Reply(200, body)

    def get_index(self, request: Request, match: re.Match[str]) -> Reply:
        body = self.indexes.get(match["name"])
        if body is None:
            return Reply(404, fixture(V, "not_found_response"))
        return Reply(200, body)

    def sync(self, request: Request, match: re.Match[str]) -> Reply:
        index = self.indexes.get(match["name"])
        if index is None:
            return Reply(404, fixture(V, "not_found_response"))
        rows = self.tables[index["delta_sync_index_spec"]["source_table"]]
        self.synced.partitions[match["name"]] = copy.deepcopy(rows)
        index["status"]["indexed_row_count"] = len(rows)
        return Reply(200, {})

    def query(self, request: Request, match: re.Match[str]) -> Reply:
        if match["name"] not in self.indexes:
            return Reply(404, fixture(V, "not_found_response"))
        body = request.body or {}
        filters = json.loads(body.get("filters_json") or "{}")
        limit = int(body.get("num_results", 10))
        found = self.synced.nearest(match["name"], body["query_vector"], 10_000,
                                    keep=lambda row: evaluate(filters, row), key="embedding")
        if body.get("query_type") == "HYBRID":  # reciprocal rank fusion with keyword overlap
            terms = _words(body.get("query_text", ""))
            by_text = sorted((f for f in found if terms & _words(f[2]["text"])),
                             key=lambda f: (-len(terms & _words(f[2]["text"])), f[0]))
            fused: dict[str, float] = {}
            for ranking in (found, by_text):
                for rank, (row_id, _, _) in enumerate(ranking, start=1):
                    fused[row_id] = fused.get(row_id, 0.0) + 1.0 / (60 + rank)
            rows = {f[0]: f[2] for f in found}
            scored = sorted(((i, s, rows[i]) for i, s in fused.items()), key=lambda x: -x[1])
        else:
            threshold = body.get("score_threshold")
            scored = [f for f in found if threshold is None or f[1] >= threshold]
        columns = body["columns"]
        reply = fixture(V, "query_response")
        reply["manifest"] = {"column_count": len(columns) + 1,
                             "columns": [{"name": c} for c in [*columns, "score"]]}
        data = [[row.get(c) for c in columns] + [score] for _, score, row in scored[:limit]]
        reply["result"] = {"row_count": len(data), "data_array": data}
        return Reply(200, reply)

    def scan(self, request: Request, match: re.Match[str]) -> Reply:
        rows = sorted(self.synced.items(match["name"]))
        after = request.body.get("last_primary_key") or ""
        page = [r for r in rows if r > after][:int(request.body.get("num_results", 10))]
        reply = fixture(V, "scan_response")
        reply["data"] = [{"fields": [{"key": "id", "value": {"string_value": r}}]} for r in page]
        reply["last_primary_key"] = page[-1] if page else after
        return Reply(200, reply)

    def statement(self, request: Request, match: re.Match[str]) -> Reply:
        sql = request.body["statement"]
        params = {p["name"]: p["value"] for p in request.body.get("parameters") or []}
        self.statements.append(sql)
        rows: list[list[Any]] = []
        if m := re.fullmatch(r"CREATE SCHEMA IF NOT EXISTS `(\w+)`\.`(\w+)`", sql):
            self.schemas.add(f"{m[1]}.{m[2]}")
        elif m := re.match(r"CREATE TABLE IF NOT EXISTS " + NAME, sql):
            if f"{m['c']}.{m['s']}" not in self.schemas:
                return self._failed("SCHEMA_NOT_FOUND")
            assert "delta.enableChangeDataFeed = true" in sql
            self.tables.setdefault(f"{m['c']}.{m['s']}.{m['t']}", {})
        elif sql.startswith("GRANT "):
            self.grants.append(sql)
        elif m := re.match(r"MERGE INTO " + NAME, sql):
            table = self.tables[f"{m['c']}.{m['s']}.{m['t']}"]
            for row in json.loads(params["rows"]):
                table[row["id"]] = row
        elif m := re.match(r"DELETE FROM " + NAME, sql):
            table = self.tables[f"{m['c']}.{m['s']}.{m['t']}"]
            for row_id in json.loads(params["ids"]):
                table.pop(row_id, None)
        elif m := re.match(r"SELECT id, to_json\(embedding\), text, metadata FROM " + NAME, sql):
            table = self.tables.get(f"{m['c']}.{m['s']}.{m['t']}")
            if table is None:
                return self._failed("TABLE_OR_VIEW_NOT_FOUND")
            rows = [[r["id"], json.dumps(r["embedding"]), r["text"], r["metadata"]]
                    for i in json.loads(params["ids"]) if (r := table.get(i))]
        else:
            return self._failed("PARSE_SYNTAX_ERROR")
        reply = fixture(V, "statement_response")
        reply["result"] = {"chunk_index": 0, "row_offset": 0, "row_count": len(rows),
                           "data_array": rows}
        return Reply(200, reply)

    @staticmethod
    def _failed(code: str) -> Reply:
        reply = fixture(V, "statement_response")
        reply["status"] = {"state": "FAILED", "error": {"error_code": code, "message": code}}
        reply.pop("result")
        return Reply(200, reply)
