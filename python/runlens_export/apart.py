"""Each program lowered and checked in a process of its own (`export.py --apart`).

In one process, every program's step leaves memory behind that the next one's
peak lands on: at SmolLM2-135M's sizes the process held 1.16 / 1.98 / 2.73 GB after
portable / xnnpack / xnnpack-int8 (docs/models.md), so the full program set died in
the last lowering under a 3 GB limit although that lowering alone fits. Here each
program's step runs in a worker process that exits when its program is written and
checked, handing back all the step made.

The workers are forked from a process forked off the export at its start (`Workers`),
before torch has run anything in parallel, for two reasons:
- a process forked after torch's OpenMP pool has run (the reference's generations)
  hangs in its first parallel region (GNU OpenMP keeps no pool across fork), and
  run on one thread instead, it would lower and check on fewer threads than --threads
  asks (the check's PyTorch side slower, and summing in another order);
- a fresh interpreter instead (spawn) would hold its own copy of what importing torch,
  transformers and ExecuTorch allocates (about 0.45 GB), beside the export's; forked,
  the imports' pages are shared with the export until written.
A worker loads the checkpoint again (its float32 weights are the file's pages, mapped,
the same pages as the export's), reads the reference from the staging folder, lowers
and checks its one program as the single process does (`lower_checked`),
and writes its manifest entry, failed checks and times to a file.

A worker that fails says why on the export's stderr (its lines are the export's); one
killed by a signal (the OOM killer's SIGKILL) is named as such.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

from .files import ExportError, process_ended, say, write_atomic
from .progress import PROGRESS


def lower_checked(task, model, names: list[str], max_seq_len: int, stage: Path, check: bool, rows: list[dict],
                  pad_id: int, failed: dict[str, list[str]]) -> list[dict]:
    """`task.lower` of `names` into `stage`, each program checked against the reference rows
    (ExecuTorch's Python runtime) as soon as it is written, inside its own step, so that its
    graphs and quantized model are freed before the next is lowered (peak memory:
    docs/models.md); what fails is added to `failed`. The export calls it with every
    program in one process, or a worker with its one (`work`)."""

    def after(entry: dict) -> None:
        failed.update(task.verify(stage, [entry], rows, pad_id, max_seq_len))

    return task.lower(model, names, max_seq_len, stage, after if check else None)


def wanted(asked: str, names: list[str]) -> bool:
    """Whether `names` go apart: --apart's yes, no, or auto (two or more programs)."""
    return asked == "yes" or (asked == "auto" and len(names) >= 2)


class Workers:
    """A process forked now, before the export loads its model, that forks one worker per
    program asked of it (`lower`). It reads a job a line from one pipe and answers each
    with the worker's exit code on another; the end of the first pipe ends it."""

    def __init__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        jobs_read, jobs_write = os.pipe()
        codes_read, codes_write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(jobs_write)
            os.close(codes_read)
            serve(jobs_read, codes_write)  # never returns
        os.close(jobs_read)
        os.close(codes_write)
        self.pid = pid
        self.jobs = os.fdopen(jobs_write, "w", encoding="utf-8")
        self.codes = os.fdopen(codes_read, "r", encoding="utf-8")

    def lower(self, job: dict, names: list[str], stage: Path, failed: dict[str, list[str]]) -> list[dict]:
        """Each of `names` lowered and checked by a worker, in order: their manifest entries,
        and their failed checks added to `failed`. `job`: what a worker needs (see `work`)."""
        entries: list[dict] = []
        for name in names:
            result_file = stage / f".apart-{name}.json"
            try:
                self.jobs.write(json.dumps({**job, "name": name, "stage": str(stage), "result": str(result_file),
                                            "progress": [PROGRESS.done, PROGRESS.total]}) + "\n")
                self.jobs.flush()
                answer = self.codes.readline()
            except BrokenPipeError:
                answer = ""
            # No answer: the forking process itself is gone, and only a signal ends it (the OOM
            # killer's, most likely); its worker's status went with it.
            code = int(answer) if answer.strip() else -9
            try:
                if code != 0 or not result_file.is_file():
                    what = ("export fewer programs at once (--programs) or free memory" if code < 0
                            else "its error is above")
                    raise ExportError(f"{name}: the process that lowers it {process_ended(code)}; {what}")
                result = json.loads(result_file.read_text(encoding="utf-8"))
            finally:
                result_file.unlink(missing_ok=True)
            if result.get("error"):
                raise ExportError(result["error"])
            entries.extend(result["entries"])
            failed.update(result["failed"])
            PROGRESS.done = result["progress"]
            for program, phases in result["times"].items():
                for phase, seconds in phases.items():
                    PROGRESS.times[program][phase] += seconds
        return entries

    def close(self) -> None:
        if self.jobs.closed:
            return
        self.jobs.close()
        self.codes.close()
        os.waitpid(self.pid, 0)


def serve(jobs_fd: int, codes_fd: int) -> None:
    """The forking process: a worker per job line, its exit code written back; ends at the
    end of the jobs (the export done, or gone)."""
    status = 0
    try:
        with os.fdopen(jobs_fd, "r", encoding="utf-8") as jobs, os.fdopen(codes_fd, "w", encoding="utf-8") as codes:
            for line in jobs:
                pid = os.fork()
                if pid == 0:
                    work(json.loads(line))  # never returns
                _, wait_status = os.waitpid(pid, 0)
                codes.write(f"{os.waitstatus_to_exitcode(wait_status)}\n")
                codes.flush()
    except KeyboardInterrupt:  # Ctrl-C reaches the export too, which says so
        status = 130
    except BaseException:  # noqa: BLE001 - reported; the export names the failure
        traceback.print_exc()
        status = 1
    finally:
        os._exit(status)


def work(job: dict) -> None:
    """A worker: load the checkpoint, lower and check program `job["name"]`, write the result,
    then `os._exit` whatever happens (an exception must not carry it on through the export's code)."""
    status = 1
    try:
        import torch

        from .checkpoint import Checkpoint
        from .tasks import TASKS

        name, stage = job["name"], Path(job["stage"])
        torch.set_num_threads(job["threads"])
        PROGRESS.done, PROGRESS.total = job["progress"]
        say(f"{name}: lowered in a process of its own, pid {os.getpid()} (--apart)")
        task = TASKS[job["task"]]
        for option, value in job["task_options"].items():
            setattr(task, option, value)
        failed: dict[str, list[str]] = {}
        try:
            ckpt = Checkpoint.minilm() if job["packaged"] else Checkpoint.from_dir(Path(job["checkpoint"]))
            model = ckpt.load(job["class_name"], task.name)
            rows = json.loads((stage / "reference.json").read_text(encoding="utf-8"))["sentences"]
            entries = lower_checked(task, model, [name], job["max_seq_len"], stage, job["check"], rows,
                                    job["pad_id"], failed)
            result = {"entries": entries, "failed": failed}
        except ExportError as e:
            result = {"error": str(e)}
        PROGRESS.stop()
        result.update(progress=PROGRESS.done, times={p: dict(t) for p, t in PROGRESS.times.items()})
        write_atomic(Path(job["result"]), json.dumps(result).encode())
        status = 0
    except KeyboardInterrupt:
        status = 130
    except BaseException:  # noqa: BLE001 - reported, then the worker ends: the export names the failure
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
