"""Multi-process training and evaluation: Hugging Face Accelerate for the process group, torchrun underneath.

One process is the default and needs nothing beyond torch: `get_context()` returns a single-process
context whose collectives are identities, and Accelerate is never imported. More than one process is
what a launcher asks for, through the environment it sets (WORLD_SIZE, RANK, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT):

    accelerate launch --multi_gpu --num_processes 8 -m jsbench train ...     # 8 GPUs
    torchrun --nproc-per-node 2 -m jsbench train ...                        # 2 CPU processes (gloo)
    jsbench eval ... --processes 2                                          # jsbench launches torchrun itself

Then Accelerate's `PartialState` joins the process group (nccl on GPUs, gloo on CPUs), picks this
process's device, and the collectives below go through `torch.distributed`.

How the work is split, and why the numbers do not depend on the number of processes:
- Training: the B contexts of an update are split into contiguous blocks, one per process. Every
  process knows the whole update's contexts (they come from (seed, it) alone). The Dirichlet draws of
  the whole global batch are made on every process from the gathered noise and prompt embeddings, and
  each keeps its block, so the draws are exactly those one process makes. Each process samples and
  scores only its block; the rewards are all-gathered into the global [B, K] tensor BEFORE any
  baseline is computed (js and xctx pool statistics over all contexts); each process forms the loss of
  its block over the global count B*K, and the gradients are summed across processes, which is the
  gradient of the one-process loss. Every process then takes the same optimizer step, so the policies
  stay identical; rank 0 alone writes the log, the checkpoints and the policy.
- Evaluation: prompts are dealt round-robin (tasks are grouped in the suites, so contiguous blocks
  would give one process all the expensive prompts); per-image scores are gathered and put back in the
  suite's order, so the records are those of one process; rank 0 alone writes them
  (`jsbench.evaluation.evaluate.evaluate_sharded`: this module is the process group alone and imports no evaluation).
"""

from __future__ import annotations

import atexit
import io
import os
import re
import signal
import socket
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from jsbench import JsbenchError

__all__ = [
    "DistributedError",
    "DistContext",
    "get_context",
    "requested_world_size",
    "launch_processes",
    "shard_range",
    "free_port",
]

INSTALL_HINT = "pip install 'jsbench[scale]' (or pip install accelerate)"


class DistributedError(JsbenchError):
    pass


def requested_world_size() -> int:
    """The number of processes a launcher (torchrun, accelerate launch) started this one among."""
    try:
        return int(os.environ.get("WORLD_SIZE", "1"))
    except ValueError:
        raise DistributedError(f"WORLD_SIZE={os.environ['WORLD_SIZE']!r} is not a number") from None


def _require_accelerate(what: str):
    try:
        import accelerate  # noqa: F401
    except ImportError:
        raise DistributedError(f"{what} needs Hugging Face Accelerate, which is not installed: {INSTALL_HINT}") from None
    return accelerate


def shard_range(n: int, rank: int, world_size: int) -> tuple[int, int]:
    """Contiguous block [lo, hi) of n items for `rank`; block sizes differ by at most one."""
    base, extra = divmod(n, world_size)
    lo = rank * base + min(rank, extra)
    return lo, lo + base + (1 if rank < extra else 0)


@dataclass
class DistContext:
    """Where this process stands: rank, world size, device, and the few collectives jsbench needs.

    With world_size 1 every collective returns its input; no process group exists.
    """

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    backend: str | None = None
    _held: int = field(default=0, repr=False, compare=False)  # open `held()` blocks: close() waits for them

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def shard_range(self, n: int) -> tuple[int, int]:
        return shard_range(n, self.rank, self.world_size)

    def shard_indices(self, n: int) -> list[int]:
        """Round-robin share of n items: rank, rank + W, rank + 2W, ..."""
        return list(range(self.rank, n, self.world_size))

    # ------------------------------------------------------------------------------------ collectives

    def _comm(self, t: torch.Tensor) -> torch.Tensor:
        """The tensor on a device the backend can move (nccl: this process's GPU; gloo: CPU)."""
        want = self.device if self.backend == "nccl" else torch.device("cpu")
        return t.to(want)

    def gather_rows(self, t: torch.Tensor) -> torch.Tensor:
        """Concatenate every process's tensor along dim 0, in rank order; row counts may differ."""
        if not self.distributed:
            return t
        import torch.distributed as dist

        local = self._comm(t.detach().contiguous())
        counts = torch.zeros(self.world_size, dtype=torch.long, device=local.device)
        counts[self.rank] = local.shape[0]
        dist.all_reduce(counts)
        most = int(counts.max())
        padded = local
        if local.shape[0] < most:
            pad = torch.zeros((most - local.shape[0], *local.shape[1:]), dtype=local.dtype, device=local.device)
            padded = torch.cat([local, pad])
        parts = [torch.empty_like(padded) for _ in range(self.world_size)]
        dist.all_gather(parts, padded)
        out = torch.cat([p[: int(c)] for p, c in zip(parts, counts.tolist())])
        return out.to(t.device)

    def sum_(self, tensors: Sequence[torch.Tensor]) -> None:
        """Sum tensors across processes in place (one flat buffer, one all-reduce)."""
        if not self.distributed or not tensors:
            return
        import torch.distributed as dist

        flat = self._comm(torch.cat([t.detach().reshape(-1) for t in tensors]))
        dist.all_reduce(flat)
        offset = 0
        for t in tensors:
            n = t.numel()
            t.copy_(flat[offset : offset + n].view_as(t))
            offset += n

    def sum_gradients(self, parameters) -> None:
        """All-reduce (sum) the gradients of `parameters`; a parameter without a gradient counts as zero."""
        if not self.distributed:
            return
        params = [p for p in parameters if p.requires_grad]
        for p in params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        self.sum_([p.grad for p in params])

    def sum_scalar(self, value: float) -> float:
        if not self.distributed:
            return value
        t = torch.tensor([value], dtype=torch.float64)
        self.sum_([t])
        return float(t[0])

    def broadcast_parameters(self, module: torch.nn.Module) -> None:
        """Rank 0's parameters and buffers everywhere (they should already agree: same seed)."""
        if not self.distributed:
            return
        import torch.distributed as dist

        for t in [*module.parameters(), *module.buffers()]:
            buf = self._comm(t.detach().clone())
            dist.broadcast(buf, src=0)
            with torch.no_grad():
                t.copy_(buf.to(t.device))

    def gather_object(self, obj: Any) -> list[Any]:
        """Every process's picklable `obj`, in rank order, on every process."""
        if not self.distributed:
            return [obj]
        import torch.distributed as dist

        out: list[Any] = [None] * self.world_size
        dist.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        if self.distributed:
            import torch.distributed as dist

            dist.barrier()

    def close(self) -> None:
        """Leave the process group together, at the end of a command that succeeded on every process.

        Every process waits for the others (rank 0 may still be writing), then tears the group down
        now rather than during interpreter shutdown: a process that exits while another still holds
        its gloo connections can take that one down with it. Not for error paths: a process that
        failed has left already, and the barrier would wait for it."""
        if not self.distributed or self._held:
            return
        self.barrier()
        _destroy()

    @contextmanager
    def held(self):
        """Several commands in one group: each one's close() inside the block keeps the group, which is left
        together when the block ends (`compare --all` runs every recipe run as a compare, in one group)."""
        self._held += 1
        try:
            yield self
        finally:
            self._held -= 1
        self.close()


_CONTEXT: DistContext | None = None


def _destroy() -> None:
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # interpreter shutdown: nothing useful left to do
        pass


def get_context() -> DistContext:
    """This process's context, created once. Multi-process (WORLD_SIZE > 1) joins the group via Accelerate."""
    global _CONTEXT
    if _CONTEXT is not None:
        return _CONTEXT
    world = requested_world_size()
    if world <= 1:
        _CONTEXT = DistContext()
        return _CONTEXT
    _require_accelerate(f"a multi-process run (WORLD_SIZE={world})")
    from accelerate import PartialState

    cpu = not torch.cuda.is_available()
    state = PartialState(cpu=cpu)
    if state.num_processes != world:
        raise DistributedError(f"Accelerate joined {state.num_processes} process(es) but the launcher started {world}")
    _CONTEXT = DistContext(
        rank=state.process_index,
        world_size=state.num_processes,
        local_rank=state.local_process_index,
        device=torch.device(state.device),
        backend=str(state.backend),
    )
    atexit.register(_destroy)
    return _CONTEXT


# ------------------------------------------------------------------------------------------ launching


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def strip_option(argv: Sequence[str], name: str) -> list[str]:
    """argv without `--name VALUE` / `--name=VALUE`."""
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == name:
            skip = True
        elif not a.startswith(name + "="):
            out.append(a)
    return out


def torchrun_command(processes: int, args: Sequence[str], port: int | None = None) -> list[str]:
    """`python -m torch.distributed.run ... -m jsbench ARGS` on this machine, on 127.0.0.1 and a free port."""
    return [
        sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc-per-node", str(processes),
        "--master-addr", "127.0.0.1", "--master-port", str(port or free_port()), "-m", "jsbench", *args,
    ]


def launch_processes(processes: int, argv: Sequence[str] | None = None) -> int:
    """Run this `jsbench` command again as `processes` processes under torchrun; returns their exit code.

    Children's refusals stay one line: the launcher's own traceback about a failed child is dropped,
    each distinct `error:` line of the children is printed once. A crash (no `error:` line) shows the
    children's own traceback and, last, one line naming how each failed process ended.
    """
    world = requested_world_size()
    if world > 1:
        raise DistributedError(f"--processes cannot be used inside an already launched run (WORLD_SIZE={world}); drop it")
    _require_accelerate(f"--processes {processes}")
    args = strip_option(list(sys.argv[1:] if argv is None else argv), "--processes")
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // processes)))
    env.setdefault("PYTHONUNBUFFERED", "1")
    proc = subprocess.Popen(torchrun_command(processes, args), env=env, stderr=subprocess.PIPE)
    # the children's progress and log lines pass through as they come (a long run is not silent until it
    # ends); from the first traceback or `error:` line on, lines wait for the verdict below
    lines: list[str] = []
    held_from = None
    try:
        with io.TextIOWrapper(proc.stderr, encoding="utf-8", errors="replace", newline="") as children:
            for raw in children:
                ln = raw.rstrip("\r\n")
                lines.append(ln)
                if held_from is None and (ln.startswith("Traceback (most recent call last):") or ln.strip().startswith("error:")):
                    held_from = len(lines) - 1
                if held_from is None and not _torchrun_line(ln):
                    sys.stderr.write(raw)
                    sys.stderr.flush()
        returncode = proc.wait()
    finally:  # interrupted (Ctrl-C, a closed stderr): torchrun and its children go too
        if proc.poll() is None:
            proc.terminate()
            proc.wait()
    held_from = len(lines) if held_from is None else held_from
    if returncode == 0:
        for ln in lines[held_from:]:
            if not _torchrun_line(ln):
                print(ln, file=sys.stderr)
        return 0
    children, failures = split_torchrun_report(lines[held_from:])  # the lines before were shown as they came
    errors = list(dict.fromkeys(ln.strip() for ln in children if ln.strip().startswith("error:")))
    refusals = [e for e in errors if not e.startswith("error: internal error")]
    internal = bool(errors) and not refusals  # a bug with no refusal before it: its traceback is the news
    if refusals:  # refusals, one line each as one process prints them; another process's traceback (and
        # its "internal error") from a collective that lost its peer is a consequence, not news
        for ln in refusals:
            print(ln, file=sys.stderr)
        return 2
    why = dict(failures)
    if (why.get(0) == "exited with 1" and all(w.startswith("was stopped by SIGTERM") for r, w in failures if r != 0)
            and not any(ln.startswith("Traceback") for ln in children)):
        # the main process's exit 1 is its verdict (`compare --check`: regressed), not a crash; torchrun
        # stopping the others after it is a consequence
        for ln in children:
            if ln.strip():
                print(ln, file=sys.stderr)
        return 1
    tail = [ln for ln in children if ln.strip()][-40:]  # the children's own traceback, not torchrun's banner
    if tail:
        print("\n".join(tail), file=sys.stderr)
    how = "; ".join(f"process {rank} {why}" for rank, why in failures) or f"torchrun exited with {returncode}"
    print(f"error: {processes}-process run failed: {how}", file=sys.stderr)
    return 3 if internal else (returncode or 1)


_AGENT_LOG = re.compile(r"^[DIWEF]\d{4} .*torch/distributed/")  # torchrun's own log lines ("Sending process ... SIGTERM")


def _torchrun_line(line: str) -> bool:
    """A line of torchrun's own (its banner, its agent's log), not a child's."""
    return "torch.distributed" in line or "*****" in line or bool(_AGENT_LOG.match(line))


def split_torchrun_report(lines: Sequence[str]) -> tuple[list[str], list[tuple[int, str]]]:
    """The children's stderr lines, and (rank, what happened) for each failed process, from torchrun's stderr.

    torchrun ends a failed run with its own traceback and a ChildFailedError banner listing each failed
    process (rank, exit code or signal). Its "root cause" is the failure with the smallest timestamp in
    whole seconds, ties going to rank 0, so it can name a process that torchrun itself stopped (SIGTERM)
    after another one failed; every entry is kept, in rank order, instead."""
    start = len(lines)
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("Traceback (most recent call last):") and any("ChildFailedError" in ln for ln in lines[i:]):
            start = i
            break
    failures: dict[int, str] = {}
    rank = None
    for ln in lines[start:]:
        m = re.match(r"\s*rank\s*:\s*(\d+)", ln)
        if m:
            rank = int(m.group(1))
            continue
        m = re.match(r"\s*exitcode\s*:\s*(-?\d+)", ln)
        if m and rank is not None:
            code = int(m.group(1))
            if code < 0:
                try:
                    name = signal.Signals(-code).name
                except ValueError:
                    name = f"signal {-code}"
                why = f"was stopped by {name}" + (" (torchrun stops the others once one fails)" if -code == signal.SIGTERM else "")
            else:
                why = f"exited with {code}"
            failures[rank] = why
            rank = None
    return [ln for ln in lines[:start] if not _AGENT_LOG.match(ln)], sorted(failures.items())
