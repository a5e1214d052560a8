"""A small real worker: takes jobs from a directory, ensures each job's adaptor version, runs it.

    python examples/worker/worker.py --repo /shared/repo --queue /shared/queue [--concurrency 4] [--name w1]
                                     [--index-url URL | --find-links URL --no-index] [--until-empty]

A job is a JSON file in ``<queue>/new/``::

    {"id": "job-17", "adaptor": "python-dateutil==2.9.0.post0", "call": "dateutil.parser:isoparse", "args": ["2026"]}

Several workers (pods) share the queue: a worker claims a job by renaming its file into ``<queue>/claimed/``
(a rename succeeds for exactly one of them), ensures the adaptor with ``await repo.aensure()`` (installed once
across all workers, waited for by the rest), runs ``call`` in a fresh interpreter that sees exactly that
version (two jobs may need two versions of one adaptor at once), and writes ``<queue>/done/<id>.json``
(or ``failed/``). At most ``--concurrency`` jobs run at a time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import socket
import time
from pathlib import Path

from repoinstall import Event, InstallOptions, Repo

log = logging.getLogger("worker")


def claim(queue: Path, name: str) -> Path | None:
    """The next job this worker owns, or ``None`` if the queue is empty."""
    for job in sorted((queue / "new").glob("*.json")):
        claimed = queue / "claimed" / f"{job.stem}.{name}.json"
        try:
            job.rename(claimed)  # exactly one worker's rename of this file succeeds
        except FileNotFoundError:
            continue  # another worker took it first
        return claimed
    return None


async def run_job(repo: Repo, queue: Path, claimed: Path, name: str) -> None:
    job = json.loads(claimed.read_text())
    outcome: dict[str, object] = {"id": job["id"], "adaptor": job["adaptor"], "worker": name}
    try:
        ensured = await repo.aensure(job["adaptor"])
        outcome.update(version=ensured.version, action=ensured.action, waited=round(ensured.seconds_waited, 3))
        # A fresh interpreter per job: another job may need another version of the same adaptor right now.
        value = await asyncio.to_thread(repo.call_isolated, [ensured], job["call"], *job.get("args", []))
        outcome["result"] = value
        folder = "done"
    except Exception as error:  # a job that fails is reported, never fatal to the worker
        outcome["error"] = f"{type(error).__name__}: {error}"
        folder = "failed"
    target = queue / folder / f"{job['id']}.json"
    temporary = target.with_name(f".{target.name}.{name}.tmp")
    temporary.write_text(json.dumps(outcome))
    temporary.rename(target)
    claimed.unlink()


async def serve(repo: Repo, queue: Path, name: str, concurrency: int, until_empty: bool) -> None:
    slots = asyncio.Semaphore(concurrency)
    running: set[asyncio.Task[None]] = set()

    async def guarded(claimed: Path) -> None:
        try:
            await run_job(repo, queue, claimed, name)
        finally:
            slots.release()

    while True:
        await slots.acquire()
        claimed = claim(queue, name)
        if claimed is None:
            slots.release()
            if until_empty:
                break
            await asyncio.sleep(0.5)
            continue
        task = asyncio.create_task(guarded(claimed))
        running.add(task)
        task.add_done_callback(running.discard)
    if running:
        await asyncio.gather(*running)


def report(event: Event) -> None:
    # What a runtime would send to its metrics: one line per ensure.
    if event.kind == "ensured":
        log.info(
            "ensured %s: %s (waited %.2fs, installing %.2fs)",
            event.requirement,
            event.action,
            event.seconds_waited,
            event.seconds_installing,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description="Run adaptor jobs from a queue directory.")
    parser.add_argument("--repo", required=True)
    parser.add_argument("--queue", required=True, type=Path)
    parser.add_argument("--name", default=f"{socket.gethostname()}-{os.getpid()}")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--index-url")
    parser.add_argument("--find-links", action="append", default=[])
    parser.add_argument("--no-index", action="store_true")
    parser.add_argument("--until-empty", action="store_true", help="stop when no job is left (default: poll)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format=f"{args.name}: %(message)s")
    for folder in ("new", "claimed", "done", "failed"):
        (args.queue / folder).mkdir(parents=True, exist_ok=True)
    options = InstallOptions(index_url=args.index_url, find_links=tuple(args.find_links), no_index=args.no_index)
    started = time.monotonic()
    with Repo(args.repo, install=options, jobs=args.concurrency, on_event=report) as repo:
        asyncio.run(serve(repo, args.queue, args.name, args.concurrency, args.until_empty))
    log.info("queue empty after %.1fs", time.monotonic() - started)


if __name__ == "__main__":
    main()
