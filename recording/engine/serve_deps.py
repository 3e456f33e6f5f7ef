"""The runtime dependencies of a vLLM release that the GPU image lacks and that `vllm serve` imports.

Usage (the CPU machine; pip and `packaging`):
    python3 recording/engine/serve_deps.py VERSION [--vllm-site DIR] [--wheels DIR] [--out FILE]

Two readings, neither by hand:
1. The wheel's own Requires-Dist (markers evaluated for CPython 3.12 on Linux x86_64, no extras), less the
   packages the image holds (image-packages.txt): the candidates.
2. The serve path's imports: every module-level import (not under `if TYPE_CHECKING:`, not inside a `try`
   that catches ImportError, not inside a function) followed through vLLM's own modules from the roots
   below (the CLI, the OpenAI server, the engine core and client, the executors, the GPU worker and both
   model runners, Qwen3 and DFlash, FlashAttention's backend, the sampler, the loader), giving the
   third-party modules loaded on the way to a running engine.
A candidate is kept when a module it ships is imported on that path, then its own requirements are added the
same way (each downloaded with --no-deps at the newest version every requirer allows), less the image's.
Requirements that the serve path never imports are listed as left out, with the wheel's size: the evidence
for carrying less. For 0.20.1 this reproduces the list that was found by blocking the image's missing
packages from import in a venv and importing the same roots (engine_transfer.py's 0.20.1 list).
The result (`--out`, default deps-VERSION.txt beside this script) is what engine_transfer.py downloads.
Static reading cannot see imports made inside functions at run time; setup.sh imports the roots on the GPU
machine and names any module still missing before a scenario runs.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from email.parser import Parser
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
# What `vllm serve TARGET --speculative-config {dflash}` imports on its way to a running engine on one GPU.
# A name ending in ".*" is the package and every module under it. Names a release lacks are skipped.
ROOTS = (
    "vllm.entrypoints.cli.main", "vllm.entrypoints.cli.serve", "vllm.entrypoints.cli.launch",
    "vllm.entrypoints.openai.api_server", "vllm.entrypoints.openai.completion.*",
    "vllm.entrypoints.openai.serving_completion",
    "vllm.v1.engine.core", "vllm.v1.engine.core_client", "vllm.v1.engine.async_llm",
    "vllm.v1.executor.uniproc_executor", "vllm.v1.executor.multiproc_executor",
    "vllm.v1.worker.gpu_worker", "vllm.v1.worker.gpu_model_runner", "vllm.v1.worker.gpu.model_runner",
    "vllm.v1.worker.gpu.spec_decode.dflash.*", "vllm.v1.spec_decode.dflash",
    "vllm.model_executor.models.qwen3", "vllm.model_executor.models.qwen3_dflash",
    "vllm.v1.attention.backends.flash_attn", "vllm.v1.sample.sampler",
    "vllm.model_executor.model_loader.default_loader",
)
PLATFORMS = [f"--platform=manylinux_2_{n}_x86_64" for n in (17, 24, 26, 27, 28, 31, 34, 35)] + [
    "--platform=manylinux2014_x86_64", "--platform=manylinux1_x86_64"]
# A requirement not imported when the serve path loads is left out only where it and what it brings weigh this
# much (MiB): a small one is carried as pip would install it, the cheaper error.
LEAVE_OUT_MIB = 2.0
ENVIRONMENT = {**default_environment(), "python_version": "3.12", "python_full_version": "3.12.3",
               "implementation_name": "cpython", "platform_python_implementation": "CPython",
               "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
               "os_name": "posix", "extra": ""}


def image_packages(path: Path = HERE / "image-packages.txt") -> dict[str, str]:
    """name -> version ("" where the image's record gives none)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[canonicalize_name(name)] = version
    return out


def requirements(metadata: str) -> list[Requirement]:
    reqs = []
    for text in Parser().parsestr(metadata).get_all("Requires-Dist") or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate(ENVIRONMENT):
            reqs.append(req)
    return reqs


# --- the serve path's imports ---------------------------------------------------------------------------

def _module_file(site: Path, name: str) -> Path | None:
    base = site.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _guarded(handlers: list[ast.ExceptHandler]) -> bool:
    names = set()
    for h in handlers:
        if h.type is None:
            return True
        for node in ast.walk(h.type):
            if isinstance(node, ast.Name):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
    return bool(names & {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _lazy_imports(tree: ast.Module) -> list[str]:
    """Absolute names imported inside functions, outside a `try` that catches ImportError."""
    found: list[str] = []
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and _guarded(node.handlers):
            guarded.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(fn):
                if id(node) in guarded:
                    continue
                if isinstance(node, ast.Import):
                    found.extend(a.name for a in node.names)
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    found.append(node.module)
    return found


def _imports(tree: ast.Module, module: str, is_pkg: bool) -> list[str]:
    """Dotted names imported when the module runs (module and class bodies, not functions)."""
    found: list[str] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.extend(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = module.split(".")
                    base = parts[: len(parts) - node.level + (1 if is_pkg else 0)]
                    prefix = ".".join(base + ([node.module] if node.module else []))
                else:
                    prefix = node.module or ""
                found.append(prefix)
                found.extend(f"{prefix}.{a.name}" for a in node.names if a.name != "*")
            elif isinstance(node, ast.If):
                test = ast.unparse(node.test)
                if "TYPE_CHECKING" not in test:
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                if not _guarded(node.handlers):
                    visit(node.body)
                visit(node.orelse)
                visit(node.finalbody)
            elif isinstance(node, (ast.With, ast.ClassDef)):
                visit(node.body)

    visit(tree.body)
    return found


def serve_path_imports(site: Path, roots: tuple[str, ...] = ROOTS) -> tuple[set[str], dict[str, list[str]], list[str]]:
    """(third-party dotted names imported on the serve path when its modules load; those imported inside
    functions of those modules, each with the modules that do; the vLLM modules read)."""
    stdlib = set(sys.stdlib_module_names)
    queue: list[str] = []
    for root in roots:
        if root.endswith(".*"):
            pkg = site.joinpath(*root[:-2].split("."))
            if pkg.is_dir():
                queue += [".".join(p.relative_to(site).with_suffix("").parts).removesuffix(".__init__")
                          for p in sorted(pkg.rglob("*.py"))]
        elif _module_file(site, root):
            queue.append(root)
    seen: set[str] = set()
    external: set[str] = set()
    lazy: dict[str, list[str]] = {}
    while queue:
        name = queue.pop()
        if name in seen:
            continue
        seen.add(name)
        parts = name.split(".")
        for i in range(1, len(parts)):  # a module's parent packages run first
            queue.append(".".join(parts[:i]))
        path = _module_file(site, name)
        if path is None:
            continue
        tree = ast.parse(path.read_bytes(), str(path))
        for imported in _imports(tree, name, path.name == "__init__.py"):
            top = imported.split(".")[0]
            if not top or top in stdlib or top == "__future__":
                continue
            if top == "vllm":
                if _module_file(site, imported):
                    queue.append(imported)
                else:  # `from vllm.x import name`: name is no module; its package runs
                    queue.append(imported.rpartition(".")[0])
            else:
                external.add(imported)
        for imported in _lazy_imports(tree):
            top = imported.split(".")[0]
            if top and top not in stdlib and top != "vllm":
                lazy.setdefault(imported, []).append(name)
    return external, lazy, sorted(m for m in seen if _module_file(site, m))


# --- the wheels -------------------------------------------------------------------------------------------

def _wheel_meta(wheel: Path) -> tuple[str, str, str, set[str]]:
    """(name, version, METADATA, the top-level and second-level modules it ships)."""
    with zipfile.ZipFile(wheel) as z:
        meta_name = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        metadata = z.read(meta_name).decode("utf-8", "replace")
        modules: set[str] = set()
        for n in z.namelist():
            first = n.split("/")[0]
            if first.endswith((".dist-info", ".data")) or not n.endswith((".py", ".so", ".pyd")):
                continue
            parts = n.split("/")
            stem = parts[-1].split(".")[0]
            dotted = [*parts[:-1], stem] if stem != "__init__" else parts[:-1]
            for depth in (1, 2):
                if len(dotted) >= depth:
                    modules.add(".".join(dotted[:depth]))
    msg = Parser().parsestr(metadata)
    return str(msg["Name"]), str(msg["Version"]), metadata, modules


def download(req: str, dest: Path) -> Path:
    before = set(dest.glob("*.whl"))
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", *PLATFORMS, "-d", str(dest), req],
                   check=True)
    new = set(dest.glob("*.whl")) - before
    if new:
        return new.pop()
    name = canonicalize_name(Requirement(req).name)
    for wheel in sorted(dest.glob("*.whl")):  # already there
        if canonicalize_name(wheel.name.split("-")[0]) == name:
            spec = Requirement(req).specifier
            if spec.contains(Version(wheel.name.split("-")[1]), prereleases=True):
                return wheel
    raise SystemExit(f"pip download {req}: no wheel")


def _provides(imported: str, modules: set[str]) -> bool:
    parts = imported.split(".")
    return parts[0] in modules and (len(parts) == 1 or ".".join(parts[:2]) in modules
                                    or not any(m.startswith(parts[0] + ".") for m in modules))


def resolve(version: str, site: Path, wheels: Path) -> dict[str, object]:
    image = image_packages()
    dist_info = next(site.glob(f"vllm-{version}.dist-info"))
    direct = requirements((dist_info / "METADATA").read_text())
    external, lazy, read = serve_path_imports(site)
    specs: dict[str, SpecifierSet] = {}
    extras: dict[str, set[str]] = {}
    requirer: dict[str, str] = {}
    image_checks: list[dict[str, str]] = []

    def note(req: Requirement, by: str) -> bool:
        name = canonicalize_name(req.name)
        if name in image:
            have = image[name]
            ok = "unknown" if not have else str(req.specifier.contains(Version(have), prereleases=True))
            image_checks.append({"package": name, "required": str(req.specifier) or "any", "by": by,
                                 "image": have or "?", "satisfied": ok})
            return False
        specs[name] = specs.get(name, SpecifierSet()) & req.specifier
        extras.setdefault(name, set()).update(req.extras)
        requirer.setdefault(name, by)
        return True

    candidates = [canonicalize_name(r.name) for r in direct if note(r, f"vllm {version}")]
    got: dict[str, tuple[str, str, Path, set[str], str]] = {}

    def fetch(name: str) -> tuple[str, str, Path, set[str], str]:
        have = got.get(name)
        if have and specs[name].contains(Version(have[1]), prereleases=True):
            return have
        wheel = download(f"{name}{specs[name]}", wheels)
        dist, ver, metadata, modules = _wheel_meta(wheel)
        got[name] = (dist, ver, wheel, modules, metadata)
        return got[name]

    def closure(names: list[str]) -> dict[str, str]:
        """The packages `names` bring (their requirements and the extras asked for, transitively, less the
        image's): name -> the version whose requirements were read."""
        queue, done = list(names), {}
        while queue:
            name = queue.pop(0)
            dist, ver, _, _, metadata = fetch(name)  # again where a later requirer narrowed the range
            if done.get(name) == ver:
                continue
            done[name] = ver
            wanted = extras.get(name, set())
            for text in Parser().parsestr(metadata).get_all("Requires-Dist") or []:
                req = Requirement(text)
                if req.marker is not None and not any(req.marker.evaluate({**ENVIRONMENT, "extra": e})
                                                      for e in ("", *wanted)):
                    continue
                if note(req, f"{dist} {ver}"):
                    queue.append(canonicalize_name(req.name))
        return done

    def mib(names: set[str]) -> float:
        return round(sum(got[n][2].stat().st_size for n in names) / 2**20, 2)

    loaded: list[str] = []
    evidence: dict[str, str] = {}
    for name in candidates:
        modules = fetch(name)[3]
        users = sorted(i for i in external if _provides(i, modules))
        if users:
            loaded.append(name)
            evidence[name] = f"imported when the serve path loads: {', '.join(users[:3])}"
    done = closure(loaded)
    left_out: list[dict[str, object]] = []
    for name in candidates:
        if name in done:
            continue
        modules = fetch(name)[3]
        late = sorted(i for i in lazy if _provides(i, modules))
        sites = sorted({m for i in late for m in lazy[i]})
        brings = set(closure([name])) - set(done)
        size = mib(brings)
        why = (f"imported only inside functions ({', '.join(sites[:4])}{', ...' if len(sites) > 4 else ''})"
               if late else "never imported on the serve path")
        if size >= LEAVE_OUT_MIB:
            left_out.append({"package": name, "version": got[name][1], "why": why, "brings": sorted(brings),
                             "MiB": size})
        else:  # cheap: carried as pip would install it
            done.update(closure([name]))
            evidence[name] = f"{why}; carried ({size} MiB with what it brings)"
    carried = sorted(done)
    pins = [f"{got[n][0]}=={got[n][1]}" for n in carried]
    return {
        "vllm": version,
        "serve_path_modules_read": len(read),
        "third_party_imported": sorted({i.split(".")[0] for i in external}),
        "dependencies": pins,
        "MiB": round(sum(got[n][2].stat().st_size for n in carried) / 2**20, 1),
        "left_out": left_out,
        "left_out_MiB": round(sum(float(str(x["MiB"])) for x in left_out), 1),
        "leave_out_threshold_MiB": LEAVE_OUT_MIB,
        "image_checks": [c for c in image_checks if c["satisfied"] != "True"],
        "why": {n: evidence.get(n) or f"required by {requirer[n]}" for n in carried},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("version")
    ap.add_argument("--vllm-site", type=Path, help="vLLM installed with pip --target (default: tests/stacks.py)")
    ap.add_argument("--wheels", type=Path, help="where the wheels are downloaded (default: a temporary directory)")
    ap.add_argument("--out", type=Path, help="the list engine_transfer.py reads (default: deps-VERSION.txt here)")
    ap.add_argument("--json", type=Path, help="the whole reading, left-out packages and image checks included")
    args = ap.parse_args()
    site = args.vllm_site
    if site is None:
        sys.path.insert(0, str(ROOT / "tests"))
        from stacks import vllm_site
        site = vllm_site(args.version)
    with tempfile.TemporaryDirectory() as tmp:
        result = resolve(args.version, site, args.wheels or Path(tmp))
    out = args.out or HERE / f"deps-{args.version}.txt"
    left = ", ".join(f"{x['package']} {x['version']} ({x['MiB']} MiB: {x['why']})"
                     for x in result["left_out"])  # type: ignore[attr-defined]
    out.write_text(
        f"# vLLM {args.version}: runtime requirements the GPU image lacks that `vllm serve` imports, with their own\n"
        f"# requirements; written by recording/engine/serve_deps.py {args.version} (its docstring says how).\n"
        f"# {result['MiB']} MiB of wheels. Left out, with what each would bring: {left or 'none'}\n"
        + "\n".join(result["dependencies"]) + "\n")  # type: ignore[arg-type]
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "why"}, indent=1))
    print(f"wrote {os.path.relpath(out)}")


if __name__ == "__main__":
    main()
