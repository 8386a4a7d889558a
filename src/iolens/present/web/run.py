"""`POST /api/v1/run`: any CLI command, run by the server on the store it owns.

The body is a tar (gzip): `.iolens-request.json` (`{"op", "params", "inputs", "outputs",
"width", "color"}`, see `iolens.present.cli.forward`) and the input files under
`in/<absolute path>`. The answer streams NDJSON events: `{"out"}`/`{"err"}` text,
`{"progress"}`, `{"file": {"param", "data"}}` (base64 of a file the command wrote),
`{"error"}` (the command's `error:` line) and last `{"exit": status}`.

Who may run what is `iolens.present.ops`; a user's call is narrowed to their own jobs
here (and their own traces, into their own jobs), with the same `scope.visible_job` as the
web pages (someone else's job is "not in the store", like an unknown one). Refusals of a
whole command are 403 before anything runs.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import tarfile
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from iolens.errors import InputError, IolensError
from iolens.present.ops import OPS, Access
from iolens.present.web.auth import Principal
from iolens.present.web.scope import visible_job
from iolens.store.base import Store

if TYPE_CHECKING:
    from iolens.ingest.http import IngestService
    from iolens.present.web.accounts import Accounts

REQUEST_MEMBER = ".iolens-request.json"
MAX_REQUEST_BYTES = 1 << 20
#: What a non-admin may upload with one command (their traces): a disk is not a quota.
MAX_USER_UPLOAD_BYTES = 1 << 30


class _Refused(Exception):
    """A command this caller may not run (403)."""


def _allowed(op: object, who: Principal) -> None:
    if not isinstance(op, str) or op not in OPS:
        raise InputError("request", f"no command `iolens {op}` runs on the server")
    why = refusal(OPS[op].access, who)
    if why is not None:
        raise _Refused(f"iolens {op}: {why}")


def refusal(access: Access, who: Principal) -> str | None:
    """Why `who` may not run an operation of this access class, or None."""
    if access == "user" or (access in ("read", "ingest") and who.admin):
        return None
    if access == "admin" and who.admin and not who.agent:
        return None
    if access == "admin" and who.agent:
        return "agent tokens cannot run this: use an administrator's token"
    return "administrators only"


def user_scope(op: str, who: Principal) -> Any:
    """The check a user's call of `op` passes through: their own jobs only."""

    def check(store: Store, params: dict[str, Any]) -> dict[str, Any]:
        if who.admin:
            return params
        if op == "jobs":  # as /api/v1/jobs: another user's name lists nothing
            if params.get("user") not in (None, who.name):
                raise IolensError(f"user {params['user']}'s jobs are not yours to list")
            return {**params, "user": who.name}
        if op in ("job", "report", "interference", "reason"):
            visible_job(store, who, params["job_id"])
        elif op == "compare":
            if params.get("tag"):
                raise IolensError("--tag looks at every user's runs: administrators only")
            for job_id in params.get("job_ids") or []:
                visible_job(store, who, job_id)
        elif op == "import trace":
            _own_traces(store, who, params)
        elif op == "findings" and not params.get("codes"):
            if not params.get("job"):
                raise IolensError("findings across all jobs are for administrators: give --job")
            visible_job(store, who, params["job"])
        return params

    return check


def _own_traces(store: Store, who: Principal, params: dict[str, Any]) -> None:
    """A user may load traces of their own processes into their own (or new) jobs."""
    from iolens.ingest.importers.trace import spool_files
    from iolens.tracefile.reader import read

    job_ids = {params["job_id"]} if params.get("job_id") else set()
    for path in spool_files([Path(p) for p in params.get("paths") or []]):
        raw = read(path)
        if raw.user != who.name:
            raise IolensError(f"{path}: a trace of user {raw.user}; you may load your own only")
        job_ids.add(params.get("job_id") or raw.job_id)
    for job_id in sorted(job_ids):
        rows = store.query('SELECT "user" FROM jobs WHERE job_id = ?', [job_id]).to_pylist()
        if rows and rows[0]["user"] != who.name:
            raise IolensError(f"job {job_id} is another user's: give your trace its own --job-id")


def router(service: IngestService, accounts: Accounts) -> APIRouter:
    from iolens.present.cli.hosted import run_command

    r = APIRouter(prefix="/api/v1", tags=["query"])

    @r.post("/run")
    async def run(request: Request) -> Response:
        """Run an `iolens` command on the server's store (what the CLI does by itself when
        a server owns the store); body: tar of the request and its input files."""
        who: Principal = request.state.principal
        root = Path(tempfile.mkdtemp(prefix="iolens-run-"))
        try:
            body = root / "body.tar"
            size, limit = 0, None if who.admin else MAX_USER_UPLOAD_BYTES
            with open(body, "wb") as f:
                async for chunk in request.stream():
                    size += len(chunk)
                    if limit is not None and size > limit:
                        shutil.rmtree(root, ignore_errors=True)
                        detail = f"uploads of non-admins stop at {limit} bytes"
                        return JSONResponse({"detail": detail}, status_code=413)
                    f.write(chunk)
            # extracting thousands of files must not hold up the event loop (ingest)
            req = await run_in_threadpool(_unpack, body, root, lambda op: _allowed(op, who))
            params, rewrites, outputs = _localise(req, root)
        except _Refused as exc:
            shutil.rmtree(root, ignore_errors=True)
            return JSONResponse({"detail": str(exc)}, status_code=403)
        except (InputError, tarfile.TarError, ValueError, KeyError, TypeError) as exc:
            shutil.rmtree(root, ignore_errors=True)
            return JSONResponse({"detail": f"bad run request: {exc}"}, status_code=400)

        op = req["op"]
        events: queue.Queue[dict[str, Any] | None] = queue.Queue()

        def rewrite(text: str) -> str:
            for server_path, client_path in rewrites:
                text = text.replace(server_path, client_path)
            return text

        def work() -> None:
            try:
                status = run_command(
                    op,
                    params,
                    service.store,
                    service.lock,
                    events.put,
                    check=user_scope(op, who),
                    rewrite=rewrite,
                    width=int(req.get("width") or 120),
                    color=req.get("color"),
                )
                if OPS[op].stored_paths:
                    _restore_paths(service, OPS[op].stored_paths, str(root / "in"))
                if op.startswith("user ") and op != "user list":
                    accounts.reload()  # a new token works, a revoked one fails, at once
                for name, path in outputs.items():
                    if path.is_file():
                        import base64

                        data = base64.b64encode(path.read_bytes()).decode()
                        events.put({"file": {"param": name, "data": data}})
                events.put({"exit": status})
            finally:
                events.put(None)
                shutil.rmtree(root, ignore_errors=True)

        def stream() -> Iterator[bytes]:
            while (event := events.get()) is not None:
                yield (json.dumps(event) + "\n").encode()

        threading.Thread(target=work, name=f"iolens-run-{op}", daemon=True).start()
        return StreamingResponse(stream(), media_type="application/x-ndjson")

    return r


def _restore_paths(
    service: IngestService, columns: tuple[tuple[str, str], ...], inside: str
) -> None:
    """The client's paths where the command stored the uploaded copies' paths."""
    with service.lock:
        for table, column in columns:
            service.store.execute(
                f"UPDATE {table} SET {column} = substr({column}, ?) WHERE starts_with({column}, ?)",
                [len(inside) + 1, inside + "/"],
            )


def _unpack(body: Path, root: Path, allowed: Any) -> dict[str, Any]:
    """The request; once `allowed(op)` accepts it, its inputs extracted under `root/in`
    (tar's data filter: no absolute names, no `..`, no devices or links out of the tree)."""
    with tarfile.open(body, mode="r:*") as tar:
        member = tar.getmember(REQUEST_MEMBER)
        if member.size > MAX_REQUEST_BYTES:
            raise ValueError("request too large")
        handle = tar.extractfile(member)
        req = json.loads(handle.read() if handle else b"{}")
        if not isinstance(req, dict) or not isinstance(req.get("params"), dict):
            raise ValueError("no params")
        allowed(req.get("op"))
        if OPS[req["op"]].inputs:
            inputs = [m for m in tar.getmembers() if m.name == "in" or m.name.startswith("in/")]
            tar.extractall(root, members=inputs, filter="data")
    body.unlink()
    return req


def _localise(
    req: dict[str, Any], root: Path
) -> tuple[dict[str, Any], list[tuple[str, str]], dict[str, Path]]:
    """Options pointing at the uploaded copies and at files to send back; the text
    replacements that make messages name the client's paths again."""
    params = dict(req["params"])
    inside = str(root / "in")
    rewrites: list[tuple[str, str]] = []
    for name, paths in (req.get("inputs") or {}).items():
        local = [inside + os.path.abspath(str(p)) for p in paths]
        typed = params.get(name)
        typed = typed if isinstance(typed, list) else [typed]
        # messages name the paths as they were typed (`logs/a.darshan`, not `/home/...`)
        rewrites += [(lp, str(t)) for lp, t in zip(local, typed, strict=False) if t is not None]
        params[name] = local if isinstance(params.get(name), list) else (local or [None])[0]
    rewrites.sort(key=lambda r: -len(r[0]))  # the most specific first
    rewrites.append((inside, ""))  # anything else under the upload: its absolute path
    outputs: dict[str, Path] = {}
    for name, client_path in (req.get("outputs") or {}).items():
        target = root / "out" / name / (Path(str(client_path)).name or "out")
        target.parent.mkdir(parents=True)
        params[name] = str(target)
        outputs[name] = target
        rewrites.insert(0, (str(target), str(client_path)))
    return params, rewrites, outputs
