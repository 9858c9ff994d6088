"""Vertex AI Vector Search's REST API v1 as documented (fixtures in ``fixtures/vertex_ai``)."""

from __future__ import annotations

import copy
import re
from typing import Any

from tests.vectors.fixture_server import FixtureServer, Reply, Request, VectorStore, fixture

V = "vertex_ai"
PARENT = r"/v1/projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)"
INDEX = "all"  # the one index: datapoint ids carry the tenant
#: ``NumericRestriction.Operator.EQUAL``: the client asks for numeric enums
#: (``$alt=json;enum-encoding=int``), which proto3 JSON allows in place of names.
EQUAL = 3


def keeps(datapoint: dict[str, Any], query: dict[str, Any]) -> bool:
    """Whether ``datapoint`` passes the query's token and numeric restricts."""
    tokens = {r["namespace"]: set(r.get("allowList", [])) for r in datapoint.get("restricts", [])}
    for restrict in query.get("restricts", []):
        if not tokens.get(restrict["namespace"], set()) & set(restrict.get("allowList", [])):
            return False
    numbers: dict[str, float] = {}
    for restrict in datapoint.get("numericRestricts", []):
        value = restrict.get("valueInt", restrict.get("valueDouble", restrict.get("valueFloat")))
        numbers[restrict["namespace"]] = float(value)
    for restrict in query.get("numericRestricts", []):
        wanted = restrict.get("valueInt", restrict.get("valueDouble", restrict.get("valueFloat")))
        value = numbers.get(restrict["namespace"])
        if restrict.get("op") not in ("EQUAL", EQUAL) or value != float(wanted):
            return False
    return True


class VertexAiEmulator(FixtureServer):
    """One index ``memories`` deployed to endpoint ``memories-endpoint`` as
    ``memories_deployed``."""

    def __init__(self) -> None:
        super().__init__()
        self.store = VectorStore()
        self.route("POST", PARENT + r"/indexes/(?P<index>[^/:]+):upsertDatapoints",
                   self.upsert, fixture(V, "upsert_datapoints_request"))
        self.route("POST", PARENT + r"/indexes/(?P<index>[^/:]+):removeDatapoints",
                   self.remove, fixture(V, "remove_datapoints_request"))
        self.route("POST", PARENT + r"/indexEndpoints/(?P<endpoint>[^/:]+):findNeighbors",
                   self.find_neighbors, fixture(V, "find_neighbors_request"))
        self.route("POST", PARENT + r"/indexEndpoints/(?P<endpoint>[^/:]+):readIndexDatapoints",
                   self.read, fixture(V, "read_index_datapoints_request"))
        self.route("GET", PARENT + r"/indexEndpoints/(?P<endpoint>[^/:]+)", self.endpoint)

    def upsert(self, request: Request, match: re.Match[str]) -> Reply:
        datapoints = request.body.get("datapoints", [])
        if len(datapoints) > 1000:
            return Reply(400, {"error": {"code": 400, "status": "INVALID_ARGUMENT",
                                         "message": "At most 1000 datapoints per request."}})
        for datapoint in datapoints:
            self.store.put(INDEX, datapoint["datapointId"], datapoint)
        return Reply(200, {})

    def remove(self, request: Request, match: re.Match[str]) -> Reply:
        self.store.remove(INDEX, request.body.get("datapointIds", []))
        return Reply(200, {})

    def find_neighbors(self, request: Request, match: re.Match[str]) -> Reply:
        reply = fixture(V, "find_neighbors_response")
        template = reply["nearestNeighbors"][0]["neighbors"][0]
        groups = []
        for query in request.body["queries"]:
            point = query["datapoint"]
            found = self.store.nearest(INDEX, point["featureVector"], query["neighborCount"],
                                       keep=lambda d, p=point: keeps(d, p),
                                       key="featureVector")
            neighbors = []
            for _, score, datapoint in found:
                neighbor = copy.deepcopy(template)
                neighbor["datapoint"] = datapoint if request.body.get("returnFullDatapoint") \
                    else {"datapointId": datapoint["datapointId"]}
                neighbor["distance"] = score
                neighbors.append(neighbor)
            groups.append({"id": point.get("datapointId", ""), "neighbors": neighbors})
        reply["nearestNeighbors"] = groups
        return Reply(200, reply)

    def read(self, request: Request, match: re.Match[str]) -> Reply:
        stored = self.store.items(INDEX)
        reply = fixture(V, "read_index_datapoints_response")
        reply["datapoints"] = [stored[i] for i in request.body.get("ids", []) if i in stored]
        return Reply(200, reply)

    def endpoint(self, request: Request, match: re.Match[str]) -> Reply:
        body = fixture(V, "index_endpoint_response")
        body["name"] = request.path.removeprefix("/v1/")
        return Reply(200, body)
