"""The operator's client of a pool runtime's control API, typed with the runtime's own models.

Every answer is read into a model of `sluice.api.wire`; a transport failure raises
`RuntimeUnreachable`, and an answer with an error status raises `RuntimeRefused` carrying the
runtime's one sentence.
"""

from __future__ import annotations

from typing import Any, TypeVar

import aiohttp
from pydantic import BaseModel, ValidationError

from sluice.api.wire import (
    BatchList,
    ExecutorState,
    ExecutorTarget,
    Problem,
    QueryList,
    QueryStatus,
    Registration,
    Removed,
    TargetAccepted,
)

M = TypeVar("M", bound=BaseModel)


class RuntimeUnreachable(Exception):
    """The runtime did not answer (or answered something that is not its API)."""


class RuntimeRefused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class RuntimeClient:
    def __init__(self, url: str, token: str, timeout: float = 120.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = aiohttp.ClientTimeout(total=timeout, connect=5)

    async def _call(self, method: str, path: str, answer: type[M], body: BaseModel | dict[str, Any] | None = None,
                    ok: tuple[int, ...] = (200,)) -> M:
        data = body.model_dump(mode="json") if isinstance(body, BaseModel) else body
        try:
            async with aiohttp.ClientSession(timeout=self.timeout) as session, session.request(
                method, f"{self.url}{path}", json=data, headers={"Authorization": f"Bearer {self.token}"}
            ) as response:
                raw = await response.read()
                status = response.status
        except (aiohttp.ClientError, TimeoutError) as error:
            raise RuntimeUnreachable(f"{type(error).__name__}: {error}") from None
        try:
            if status in ok:
                return answer.model_validate_json(raw)
            problem = Problem.model_validate_json(raw)
        except ValidationError:
            raise RuntimeUnreachable(f"HTTP {status} with a body that is not the runtime's API") from None
        raise RuntimeRefused(status, problem.error)

    async def register(self, manifest: dict[str, Any], weight: float = 1.0) -> Registration:
        """Add or update a query; `weight`: its namespace's quota weight on the pool."""
        meta = manifest["metadata"]
        return await self._call("PUT", f"/v1/queries/{meta['namespace']}/{meta['name']}?weight={weight:g}",
                                Registration, manifest)

    async def deregister(self, namespace: str, name: str) -> bool:
        """Remove a query; False if the runtime did not host it."""
        try:
            await self._call("DELETE", f"/v1/queries/{namespace}/{name}", Removed)
        except RuntimeRefused as refused:
            if refused.status == 404:
                return False
            raise
        return True

    async def status(self, namespace: str, name: str) -> QueryStatus | None:
        """A hosted query's status; None if the runtime does not host it."""
        try:
            return await self._call("GET", f"/v1/queries/{namespace}/{name}", QueryStatus)
        except RuntimeRefused as refused:
            if refused.status == 404:
                return None
            raise

    async def queries(self) -> dict[str, QueryStatus]:
        return (await self._call("GET", "/v1/queries", QueryList)).queries

    async def batches(self, key: str, since: float) -> BatchList:
        """A hosted query's measured batches committed after `since` (epoch seconds) that its latency
        window still holds (the last minute)."""
        return await self._call("GET", f"/v1/queries/{key}/batches?since={since}", BatchList)

    async def executors(self) -> ExecutorState:
        return await self._call("GET", "/v1/executors", ExecutorState)

    async def set_executors(self, target: int) -> TargetAccepted:
        return await self._call("PUT", "/v1/executors", TargetAccepted, ExecutorTarget(target=target), ok=(202,))


async def healthy(url: str) -> bool:
    """Whether the runtime at `url` answers /healthz (no token needed)."""
    try:
        timeout = aiohttp.ClientTimeout(total=3)
        async with aiohttp.ClientSession(timeout=timeout) as session, session.get(f"{url}/healthz") as response:
            return response.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False
