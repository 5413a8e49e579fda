"""Latency of `mhalint server` on an edit, against `mhalint check` of the same file as a process (issue 17).

The file: about 1,000 lines of generated attention code (nn.Module classes with nn.MultiheadAttention with and
without batch_first, padding masks built from `tokens == PAD_ID` and given to F.scaled_dot_product_attention,
causal masks, dropout, plus the ordinary code around them: configs, collate functions, schedules, poolers), written
deterministically into a temporary directory. It has findings; the edits keep it valid Python.

Measured, interleaved over `--rounds` rounds (the order flips each round, so load on a shared machine hits both
alike), wall time:
  process   `python -m mhalint check --no-cache --output-format concise FILE` (the baseline; exit 1, findings,
            counts as success), on the text the server has at that moment
  server    from just before a `textDocument/didChange` is sent to the arrival of the `publishDiagnostics` for
            that URI and version, `--edits` edits a round. Each edit is incremental (a range and its new text) and
            small: the value of a constant and the text of a comment line, alternately. Edits are `--pause` seconds
            apart (more than the server's 300 ms debounce window), so each is an isolated edit that the server
            checks at once.
The server (`python -m mhalint server`, over stdio, through pygls's LanguageClient) is started once; after
`initialize`, the document is opened (its first publish is printed as the cold figure, not a target) and
`--warmup` unmeasured edits follow. After the rounds, the server's own work for one edit is timed in this process
for reference: `Session.opened` + `Session.check` on the same text (what the server's session thread runs, without
the protocol).

Targets (issue 17): server median <= 0.3 x process median; server median < 150 ms. Exit status: 1 when a target
is not met or anything fails (a process exits other than 0/1, a publish does not arrive, a publish has no findings),
else 0.

Usage:
    python benchmarks/server_latency.py [--rounds 20] [--edits 1] [--warmup 2] [--pause 0.4] [--lines 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import importlib.util
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from speed import cpu_model  # this script's folder is on the path when it runs

REPO = Path(__file__).resolve().parents[1]

TARGET_RATIO = 0.3  # server / process, at most
TARGET_MS = 150.0  # server median, under
DEFAULT_DEBOUNCE_MS = 300.0  # the server's, unless --debounce sends another
FINDING = re.compile(r".+:\d+:\d+: [A-Z]+\d+ ")  # a concise finding line: path:line:col: CODE ...
WAIT_S = 60.0  # the longest wait for one publish before the run counts as failed

HEADER = '''"""Generated for benchmarks/server_latency.py: attention modules and the ordinary code around them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

PAD_ID = 0
SCALE = 1000
# revision 0
'''
SCALE_LINE = "SCALE = "  # the two lines the edits change, found by their start
COMMENT_LINE = "# revision "

UNITS = [
    '''

@dataclass
class Config{i}:
    dim: int = {dim}
    heads: int = {heads}
    dropout: float = 0.{i}
    vocab: int = {vocab}

    def head_dim(self) -> int:
        return self.dim // self.heads


class Encoder{i}(nn.Module):
    """A post-norm encoder layer; its attention reads (L, N, E) unless told otherwise."""

    def __init__(self, config: Config{i}):
        super().__init__()
        self.embed = nn.Embedding(config.vocab, config.dim, padding_idx=PAD_ID)
        self.attn = nn.MultiheadAttention(config.dim, config.heads, dropout=config.dropout)
        self.norm = nn.LayerNorm(config.dim)
        self.ff = nn.Sequential(nn.Linear(config.dim, 4 * config.dim), nn.GELU(), nn.Linear(4 * config.dim, config.dim))

    def forward(self, tokens):
        x = self.embed(tokens)
        padding = tokens == PAD_ID
        out, weights = self.attn(x, x, x, key_padding_mask=padding)
        x = self.norm(x + out)
        return self.norm(x + self.ff(x))
''',
    '''

class SelfAttention{i}(nn.Module):
    def __init__(self, dim: int = {dim}, heads: int = {heads}, pad_id: int = PAD_ID):
        super().__init__()
        self.heads = heads
        self.pad_id = pad_id
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, tokens):
        b, t, c = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        keep = tokens == self.pad_id
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])
        return self.proj(y.transpose(1, 2).reshape(b, t, c))
''',
    '''

def collate{i}(batch: list[list[int]], pad_id: int = PAD_ID) -> torch.Tensor:
    """Right-pads token lists to the longest one."""
    longest = max((len(item) for item in batch), default=0)
    rows = [item + [pad_id] * (longest - len(item)) for item in batch]
    return torch.tensor(rows, dtype=torch.long)


def warmup_schedule{i}(step: int, warmup: int = {warmup}, base: float = 3e-4) -> float:
    if step < warmup:
        return base * (step + 1) / warmup
    progress = (step - warmup) / max(1, 10_000 - warmup)
    return base * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


class Decoder{i}(nn.Module):
    def __init__(self, dim: int = {dim}, heads: int = {heads}):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.cross = nn.MultiheadAttention(dim, heads, batch_first=True)

    def forward(self, x, memory, memory_tokens):
        t = x.shape[1]
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool, device=x.device), diagonal=1)
        h, _ = self.attn(x, x, x, attn_mask=causal, need_weights=False)
        pad = memory_tokens == PAD_ID
        h, _ = self.cross(h, memory, memory, key_padding_mask=pad, need_weights=False)
        return x + h
''',
    '''

class CausalBlock{i}(nn.Module):
    def __init__(self, dim: int = {dim}, heads: int = {heads}, p: float = 0.1):
        super().__init__()
        self.heads = heads
        self.p = p
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim)

    def forward(self, x, lengths):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=-1)
        q = q.view(b, t, self.heads, -1).transpose(1, 2)
        k = k.view(b, t, self.heads, -1).transpose(1, 2)
        v = v.view(b, t, self.heads, -1).transpose(1, 2)
        keep = torch.arange(t, device=x.device)[None, :] < lengths[:, None]
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :], is_causal=True,
                                           dropout_p=self.p)
        return self.out(y.transpose(1, 2).reshape(b, t, c))


def count_parameters{i}(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters() if p.requires_grad)
''',
    '''

class Pooler{i}:
    """Mean-pools hidden states over the tokens that are not padding."""

    def __init__(self, pad_id: int = PAD_ID, eps: float = 1e-6):
        self.pad_id = pad_id
        self.eps = eps

    def __call__(self, hidden: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        keep = (tokens != self.pad_id).unsqueeze(-1).to(hidden.dtype)
        total = (hidden * keep).sum(dim=1)
        return total / keep.sum(dim=1).clamp_min(self.eps)

    def describe(self) -> str:
        return f"Pooler{i}(pad_id={{self.pad_id}}, eps={{self.eps}})"


def build_model{i}(vocab: int = {vocab}) -> nn.Module:
    layer = nn.TransformerEncoderLayer(d_model={dim}, nhead={heads}, dim_feedforward=4 * {dim})
    return nn.Sequential(nn.Embedding(vocab, {dim}), nn.TransformerEncoder(layer, num_layers=2))
''',
]
SHAPES = [(256, 8), (512, 8), (384, 6), (768, 12), (128, 4), (192, 3)]  # (dim, heads); 3 heads is MHA004


def generate(lines: int) -> str:
    """About `lines` lines: the units above in turn, each with its own names and sizes, while they fit."""
    parts, count, i = [HEADER], HEADER.count("\n"), 0
    while True:
        dim, heads = SHAPES[i % len(SHAPES)]
        unit = UNITS[i % len(UNITS)].format(i=i, dim=dim, heads=heads, vocab=30_000 + 7 * i,
                                            warmup=100 * (i % 9 + 1))
        if count + unit.count("\n") > lines:
            return "".join(parts)
        parts.append(unit)
        count += unit.count("\n")
        i += 1


def say(*parts: object) -> None:
    print(*parts, flush=True)


class Failure(Exception):
    """Something went wrong: the run cannot be trusted (exit 1)."""


# ---------------------------------------------------------------------------------------------- the document

class Document:
    """The text as the client holds it, and the small edits made to it."""

    def __init__(self, text: str):
        self.lines = text.split("\n")
        self.version = 1
        self.edits = 0
        self.scale_row = next(n for n, line in enumerate(self.lines) if line.startswith(SCALE_LINE))
        self.comment_row = next(n for n, line in enumerate(self.lines) if line.startswith(COMMENT_LINE))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    def edit(self):
        """The next edit as an incremental change (its row's old text replaced), applied here; the version
        goes up by one."""
        from lsprotocol import types

        self.edits += 1
        if self.edits % 2:
            row, new = self.scale_row, f"{SCALE_LINE}{1000 + self.edits}"
        else:
            row, new = self.comment_row, f"{COMMENT_LINE}{self.edits}: scale changed {self.edits // 2} times"
        old = self.lines[row]
        self.lines[row] = new
        self.version += 1
        return types.TextDocumentContentChangePartial(
            range=types.Range(types.Position(row, 0), types.Position(row, len(old))), text=new)


# ---------------------------------------------------------------------------------------------- the client

@dataclass
class Publish:
    at: float  # time.perf_counter() when it arrived
    uri: str
    version: int | None
    codes: list[str]


@dataclass
class Client:
    """A pygls LanguageClient running `python -m mhalint server`, recording every publish as it arrives."""

    uri: str
    publishes: list[Publish] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)  # window/logMessage and showMessage, errors first
    stderr: bytearray = field(default_factory=bytearray)
    waiters: dict[tuple[str, int], asyncio.Future] = field(default_factory=dict)

    async def start(self, root: Path, debounce_ms: float | None) -> float:
        from lsprotocol import types
        from pygls.lsp.client import LanguageClient

        self.lsp = LanguageClient("mhalint-server-latency", "1")

        @self.lsp.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def published(params: types.PublishDiagnosticsParams) -> None:
            now = time.perf_counter()
            codes = [str(d.code) for d in params.diagnostics]
            self.publishes.append(Publish(now, params.uri, params.version, codes))
            waiter = self.waiters.pop((params.uri, params.version), None)
            if waiter is not None and not waiter.done():
                waiter.set_result(self.publishes[-1])

        @self.lsp.feature(types.WINDOW_LOG_MESSAGE)
        def logged(params: types.LogMessageParams) -> None:
            self.messages.append(f"log {params.type.name}: {params.message}")

        @self.lsp.feature(types.WINDOW_SHOW_MESSAGE)
        def shown(params: types.ShowMessageParams) -> None:
            self.messages.append(f"show {params.type.name}: {params.message}")

        start = time.perf_counter()
        await self.lsp.start_io(sys.executable, "-m", "mhalint", "server", cwd=str(root),
                                env=os.environ | {"NO_COLOR": "1"})
        self.drain = asyncio.create_task(self._drain(self.lsp._server.stderr))  # a full pipe would stop it
        options = {"debounce": debounce_ms} if debounce_ms is not None else None
        await asyncio.wait_for(self.lsp.initialize_async(types.InitializeParams(
            capabilities=types.ClientCapabilities(),
            root_uri=root.as_uri(), workspace_folders=[types.WorkspaceFolder(root.as_uri(), root.name)],
            initialization_options=options)), WAIT_S)
        self.lsp.initialized(types.InitializedParams())
        return time.perf_counter() - start

    async def _drain(self, stream) -> None:
        while chunk := await stream.read(65536):
            self.stderr += chunk

    def expect(self, version: int) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        self.waiters[(self.uri, version)] = future
        return future

    async def arrival(self, future: asyncio.Future, version: int) -> Publish:
        try:
            return await asyncio.wait_for(future, WAIT_S)
        except asyncio.TimeoutError:
            raise Failure(f"no publishDiagnostics for version {version} within {WAIT_S:.0f} s"
                          + self.server_state()) from None

    def rss_mb(self) -> float | None:
        """The server process's resident set size now (from /proc), or None where it cannot be read."""
        try:
            with open(f"/proc/{self.lsp._server.pid}/status") as handle:
                for line in handle:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except (OSError, AttributeError, ValueError):
            pass
        return None

    def server_state(self) -> str:
        process = self.lsp._server
        state = f"; the server {'is running' if process.returncode is None else f'exited {process.returncode}'}"
        tail = self.stderr.decode("utf-8", "replace")[-2000:]
        return state + (f"; its stderr ends:\n{tail}" if tail else "")

    async def open(self, document: Document) -> float:
        """didOpen; the seconds to its first publish."""
        from lsprotocol import types

        future = self.expect(document.version)
        start = time.perf_counter()
        self.lsp.text_document_did_open(types.DidOpenTextDocumentParams(
            types.TextDocumentItem(self.uri, "python", document.version, document.text)))
        return (await self.arrival(future, document.version)).at - start

    async def change(self, document: Document) -> tuple[float, Publish]:
        """One small edit; the seconds from just before its didChange to its publish."""
        from lsprotocol import types

        change = document.edit()
        future = self.expect(document.version)
        start = time.perf_counter()
        self.lsp.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=document.version, uri=self.uri), [change]))
        publish = await self.arrival(future, document.version)
        return publish.at - start, publish

    async def stop(self) -> None:
        process = getattr(self.lsp, "_server", None) if hasattr(self, "lsp") else None
        if process is None:
            return
        try:
            if process.returncode is None:
                await asyncio.wait_for(self.lsp.shutdown_async(None), 10)
                self.lsp.exit(None)
                await asyncio.wait_for(process.wait(), 10)
        except (asyncio.TimeoutError, RuntimeError, OSError):
            pass
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
            try:
                await asyncio.wait_for(self.lsp.stop(), 10)
            except (asyncio.TimeoutError, RuntimeError):
                pass


# ---------------------------------------------------------------------------------------------- the baseline

@dataclass
class Check:
    wall: float
    code: int
    findings: int
    stderr: str


async def check_process(path: Path) -> Check:
    """`mhalint check --no-cache --output-format concise FILE` as a process, its wall time."""
    start = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mhalint", "check", "--no-cache", "--output-format", "concise", str(path),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=str(path.parent),
        env=os.environ | {"NO_COLOR": "1"})
    out, err = await process.communicate()
    wall = time.perf_counter() - start
    lines = out.decode("utf-8", "replace").splitlines()
    findings = sum(1 for line in lines if FINDING.match(line))
    return Check(wall, process.returncode, findings, err.decode("utf-8", "replace"))


# ---------------------------------------------------------------------------------------------- in process

def in_process(path: Path, root: Path, text: str, repeat: int) -> tuple[list[float], list[float], int]:
    """The server's own work for one edit, without the protocol: Session.opened then Session.check, as its
    session thread runs them (seconds of each, `repeat` times), and the findings of the last check."""
    from mhalint.server.session import Session, Source

    session = Session([str(root)])
    opened, checked, found = [], [], 0
    for number in range(repeat + 1):  # the first is a warm-up: imports, the project index, the rules
        source = Source(path.as_uri(), str(path), number + 1, text=text)
        start = time.perf_counter()
        session.opened(source)
        middle = time.perf_counter()
        outcome = session.check(source)
        end = time.perf_counter()
        found = len(outcome.findings)
        if number:
            opened.append(middle - start)
            checked.append(end - middle)
    return opened, checked, found


# ---------------------------------------------------------------------------------------------- reporting

def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def fmt_mb(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.0f} MB"


def spread(values: list[float]) -> str:
    return (f"median {ms(statistics.median(values)):>7}  min {ms(min(values)):>7}  max {ms(max(values)):>7}"
            f"  (n={len(values)})")


def compile_bytecode() -> str:
    """Byte-compile mhalint and its rules, as pip does on install: with PYTHONDONTWRITEBYTECODE=1 an editable
    checkout would otherwise recompile every changed module at each process start (the baseline's cost, not
    mhalint's)."""
    folders = []
    for name in ("mhalint", "mhalint.rules"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            folders.append(list(spec.submodule_search_locations)[0])
    result = subprocess.run([sys.executable, "-m", "compileall", "-q", *folders], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=os.environ | {"PYTHONDONTWRITEBYTECODE": ""})
    return "byte-compiled" if result.returncode == 0 else f"byte-compiling failed: {result.stderr.strip()[:200]}"


def versions() -> str:
    found = []
    for name in ("mhalint", "pygls", "lsprotocol", "libcst"):
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            found.append(f"{name} ?")
    return ", ".join(found)


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


# ---------------------------------------------------------------------------------------------- main

async def measure(options: argparse.Namespace, root: Path, path: Path, document: Document) -> int:
    client = Client(path.as_uri())
    server_times: list[float] = []
    process_times: list[float] = []
    edit_codes: set[tuple[str, ...]] = set()
    errors: list[str] = []
    try:
        started = await client.start(root, options.debounce)
        say(f"server: started and initialized in {ms(started)}")
        cold = await client.open(document)
        first = client.publishes[-1]
        say(f"server: first publish after didOpen (cold: project index, rules, first parse): {ms(cold)}, "
            f"{len(first.codes)} diagnostics")
        last_change = time.perf_counter()
        for _ in range(options.warmup):
            await asyncio.sleep(max(0.0, options.pause - (time.perf_counter() - last_change)))
            last_change = time.perf_counter()
            await client.change(document)
        rss_warm = client.rss_mb()
        say(f"server: {options.warmup} warm-up edits done; server RSS {fmt_mb(rss_warm)}")

        say(f"\n{'round':>5} {'process':>9} {'exit':>4} {'server':>8}")
        for number in range(options.rounds):
            async def process_run() -> tuple[float, int]:
                path.write_text(document.text)  # the text the server has now
                run = await check_process(path)
                if run.code not in (0, 1):
                    raise Failure(f"mhalint check exited {run.code}:\n{run.stderr[-2000:]}")
                if run.findings == 0:
                    errors.append(f"round {number + 1}: mhalint check printed no findings")
                process_times.append(run.wall)
                return run.wall, run.code

            async def server_edits() -> list[float]:
                nonlocal last_change
                times = []
                for _ in range(options.edits):
                    await asyncio.sleep(max(0.0, options.pause - (time.perf_counter() - last_change)))
                    last_change = time.perf_counter()
                    latency, publish = await client.change(document)
                    edit_codes.add(tuple(sorted(publish.codes)))
                    times.append(latency)
                server_times.extend(times)
                return times

            if number % 2 == 0:
                wall, code = await process_run()
                times = await server_edits()
            else:
                times = await server_edits()
                wall, code = await process_run()
            say(f"{number + 1:>5} {ms(wall):>9} {code:>4} {' '.join(ms(t) for t in times):>8}")
        rss_end = client.rss_mb()
        final_codes = client.publishes[-1].codes
        extra = [p for p in client.publishes if p.uri != client.uri or p.version is None]
        stale = len(client.publishes) - 1 - options.warmup - options.rounds * options.edits - len(extra)
    finally:
        await client.stop()

    opened, checked, in_process_findings = in_process(path, root, document.text, options.in_process)

    say("")
    say(f"process  `mhalint check --no-cache` FILE: {spread(process_times)}")
    say(f"server   didChange -> publishDiagnostics: {spread(server_times)}")
    say(f"server RSS: {fmt_mb(rss_warm)} after the warm-up, {fmt_mb(rss_end)} after the rounds")
    say(f"in-process reference (this process, after the rounds): Session.opened {spread(opened)}")
    say(f"                                                        Session.check  {spread(checked)}")
    codes = {}
    for code in final_codes:
        codes[code] = codes.get(code, 0) + 1
    say(f"findings: server {len(final_codes)} diagnostics ({', '.join(f'{c} x{n}' for c, n in sorted(codes.items()))});"
        f" mhalint check {process_findings(path)} concise lines; in-process Session.check {in_process_findings}")
    if len(edit_codes) > 1:
        say(f"note: the edits' publishes did not all carry the same diagnostic codes ({len(edit_codes)} sets)")
    if any(not codes for codes in edit_codes) or not final_codes:
        errors.append("a publish after an edit had no diagnostics: the file was not analysed")
    if any(code.startswith("MHA90") for code in final_codes):
        errors.append("the server reported an engine problem (MHA90x) on the file")
    if stale or extra:
        say(f"note: {stale} publishes besides the one per version, {len(extra)} for other URIs or without version")
    problems = [m for m in client.messages if m.startswith(("log Error", "show Error"))]
    for message in problems[:5]:
        errors.append(f"the server said: {message[:500]}")

    server, process = statistics.median(server_times), statistics.median(process_times)
    ratio = server / process
    results = [("server / process", f"{ratio:.3f}", f"<= {TARGET_RATIO}", ratio <= TARGET_RATIO),
               ("server median", ms(server), f"< {TARGET_MS:.0f} ms", server * 1000 < TARGET_MS)]
    say(f"\n{'figure':<18} {'value':>8}  {'target (issue 17)':<18} verdict")
    for name, value, target, met in results:
        say(f"{name:<18} {value:>8}  {target:<18} {'PASS' if met else 'FAIL'}")
    say(f"(process median {ms(process)}, server median {ms(server)}; load average at the end {load()})")
    for error in errors:
        say(f"error: {error}")
    return 0 if all(met for *_, met in results) and not errors else 1


def process_findings(path: Path) -> str:
    result = subprocess.run([sys.executable, "-m", "mhalint", "check", "--no-cache", "--output-format", "concise",
                             str(path)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            cwd=str(path.parent), env=os.environ | {"NO_COLOR": "1"})
    return str(sum(1 for line in result.stdout.splitlines() if FINDING.match(line)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds: one process run each [20]")
    parser.add_argument("--edits", type=int, default=1, help="measured server edits per round [1]")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured edits after the first publish [2]")
    parser.add_argument("--pause", type=float, default=0.4,
                        help="seconds between two edits' didChange; more than the debounce window [0.4]")
    parser.add_argument("--debounce", type=float, default=None,
                        help="milliseconds of debounce sent in initializationOptions [the server's default, 300]")
    parser.add_argument("--lines", type=int, default=1000, help="length of the generated file [1000]")
    parser.add_argument("--in-process", type=int, default=5, help="in-process reference runs [5]")
    options = parser.parse_args(argv)
    if options.rounds < 1 or options.edits < 1 or options.warmup < 0 or options.in_process < 1:
        parser.error("--rounds, --edits and --in-process must be at least 1, --warmup at least 0")
    debounce = options.debounce if options.debounce is not None else DEFAULT_DEBOUNCE_MS
    if options.pause * 1000 <= debounce:
        parser.error(f"--pause ({options.pause} s) must exceed the debounce window ({debounce:.0f} ms), "
                     "or the edits are not isolated")

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    say(f"python {platform.python_version()} ({sys.executable}); {platform.platform()}")
    say(f"cpu: {cpu_model()}, {cores} cores available; load average {load()}")
    say(f"{versions()}; {compile_bytecode()}")
    with tempfile.TemporaryDirectory(prefix="mhalint-server-latency-") as directory:
        root = Path(directory).resolve()
        path = root / "attention_models.py"
        text = generate(options.lines)
        path.write_text(text)
        document = Document(text)
        say(f"file: {path.name}, {text.count(chr(10))} lines, {len(text.encode())} bytes; {options.rounds} rounds "
            f"x {options.edits} edit(s), {options.warmup} warm-up edits, {options.pause} s between edits, "
            f"debounce {debounce:.0f} ms")
        try:
            return asyncio.run(measure(options, root, path, document))
        except Failure as failure:
            say(f"error: {failure}")
            return 1
        except Exception:  # noqa: BLE001 - any failure is a failed run, said in one place
            say(f"error: the run failed:\n{traceback.format_exc()}")
            return 1


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
