"""The runtime dependencies of a vLLM release that the GPU image lacks, read from the release itself.

Usage (the CPU machine; pip and `packaging`):
    python3 recording/engine/serve_deps.py VERSION [--vllm-site DIR] [--wheels DIR] [--out FILE] [--json FILE]

Three readings, none by hand:
1. pip's resolver on `vllm==VERSION` for the image's Python (3.12) and platform, with the image's known versions
   (image-packages.txt) as constraints (`pip install --dry-run --report`): every package and version pip would
   install. A constraint the release excludes is dropped and named (0.26.0: numba==0.65.0 wants numpy<2.5, the
   image has 2.5.2).
2. The serve path's imports: every module-level import (not under `if TYPE_CHECKING:` or a test that the
   package is there, not inside a `try` that catches ImportError, not inside a function) followed through
   vLLM's own modules from ROOTS (the CLI, the OpenAI server, the engine core and client, the executors, the
   GPU worker and both model runners, Qwen3 and DFlash, FlashAttention's backend, the sampler, the loader),
   giving the third-party modules loaded on the way to a running engine; and the imports inside the functions
   of those modules.
3. Each of vLLM's direct requirements the image lacks is carried, with what it brings (its requirements in
   pip's resolution, transitively, less the image's), when a module it ships is imported as the serve path
   loads, or when import-blocking found it needed on 0.20.1's serve path (deps-0.20.1.txt: xgrammar,
   llguidance); otherwise it is carried when it and what it brings weigh less than LEAVE_OUT_MIB, and left
   out, named with its import sites (inside functions) or none, when they weigh more.
The result (`--out`, default deps-VERSION.txt beside this script) is what engine_transfer.py downloads.
A static reading cannot see every import made inside a function at run time: on 0.20.1, against the list found
by blocking the image's missing packages from import and importing the serve path (deps-0.20.1.txt), the
module-level reading alone missed setproctitle, python-json-logger, ijson, lark, llguidance, xgrammar and
prometheus-fastapi-instrumentator (imported inside functions of modules the walk does not reach); they are
small, and rule 3 carries such small requirements whatever their reading. setup.sh imports the roots on the
GPU machine and names any module still missing before a scenario runs.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from email.parser import Parser
from pathlib import Path
from typing import Any

from packaging.markers import default_environment
from packaging.requirements import Requirement
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
# every manylinux tag glibc 2.39 (the image's Ubuntu 24.04) runs: pip matches --platform exactly
PLATFORMS = [f"--platform=manylinux_2_{n}_x86_64" for n in range(17, 40)] + [
    "--platform=manylinux2014_x86_64", "--platform=manylinux2010_x86_64", "--platform=manylinux1_x86_64"]
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


# An `if` whose body runs only for type checkers, or only where a package is found (vLLM's has_flashinfer(),
# find_spec(...), is_available()): its imports are not needed to serve.
OPTIONAL_TEST = re.compile(r"TYPE_CHECKING|\bhas_\w+\(|find_spec\(|_available\b|is_available\(")


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
                if not OPTIONAL_TEST.search(test):
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


def pip_resolve(version: str, image: dict[str, str], work: Path) -> tuple[list[dict[str, object]], list[str]]:
    """pip's own resolver on `vllm==VERSION` for the GPU machine's Python and platform, with the image's known
    versions as constraints (`pip install --dry-run --report`: metadata only, nothing installed). A constraint
    the release's requirements exclude is dropped and named (the image's version conflicts with them)."""
    dropped: list[str] = []
    report = work / "report.json"
    while True:
        constraints = work / "image-constraints.txt"
        constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(image.items()) if v and n not in dropped))
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
                               "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp", *PLATFORMS,
                               "--target", str(work / "unused"), "--report", str(report), "-c", str(constraints),
                               f"vllm=={version}"], capture_output=True, text=True, check=False)
        if proc.returncode == 0:
            break
        conflict = [ln for ln in proc.stdout.splitlines() + proc.stderr.splitlines()
                    if "The user requested (constraint)" in ln]
        if not conflict:
            raise SystemExit(proc.stderr[-3000:])
        name = canonicalize_name(conflict[0].split("(constraint)")[1].strip().split("==")[0])
        cause = [ln.strip() for ln in proc.stdout.splitlines() if " depends on " in ln and name in ln]
        dropped.append(name)
        print(f"the image's {name}=={image[name]} is outside: {'; '.join(cause)[:400]}", file=sys.stderr)
    items: list[dict[str, object]] = json.loads(report.read_text())["install"]
    return items, dropped


def download(req: str, dest: Path) -> Path:
    name, _, ver = req.partition("==")
    for wheel in sorted(dest.glob("*.whl")):  # already there
        if canonicalize_name(wheel.name.split("-")[0]) == canonicalize_name(name) and wheel.name.split("-")[1] == ver:
            return wheel
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                    "--python-version", "3.12", "--implementation", "cp", *PLATFORMS, "-d", str(dest), req],
                   check=True)
    for wheel in sorted(dest.glob("*.whl")):
        if canonicalize_name(wheel.name.split("-")[0]) == canonicalize_name(name) and wheel.name.split("-")[1] == ver:
            return wheel
    raise SystemExit(f"pip download {req}: no wheel")


def _provides(imported: str, modules: set[str]) -> bool:
    parts = imported.split(".")
    return parts[0] in modules and (len(parts) == 1 or ".".join(parts[:2]) in modules
                                    or not any(m.startswith(parts[0] + ".") for m in modules))


def resolve(version: str, site: Path, wheels: Path) -> dict[str, object]:
    image = image_packages()
    external, lazy, read = serve_path_imports(site)
    resolved, conflicts = pip_resolve(version, image, wheels)
    meta = {canonicalize_name(str(it["metadata"]["name"])): it["metadata"] for it in resolved}  # type: ignore[index]
    pins = {n: str(m["version"]) for n, m in meta.items()}  # type: ignore[index]
    edges: dict[str, set[str]] = {}
    image_checks: list[dict[str, str]] = []
    for name, m in meta.items():
        edges[name] = set()
        for text in m.get("requires_dist") or []:  # type: ignore[union-attr]
            req = Requirement(text)
            dep = canonicalize_name(req.name)
            if dep not in meta or (req.marker is not None and not any(
                    req.marker.evaluate({**ENVIRONMENT, "extra": e}) for e in ("", *_extras(req.marker)))):
                continue
            edges[name].add(dep)
            if dep in image and name not in image:
                have = image[dep]
                ok = "unknown" if not have else str(req.specifier.contains(Version(have), prereleases=True))
                if ok != "True":
                    image_checks.append({"package": dep, "required": str(req.specifier) or "any",
                                         "by": f"{name} {pins[name]}", "image": have or "?", "satisfied": ok})
    direct = sorted(edges.get("vllm", set()) - set(image))

    def closure(names: list[str]) -> set[str]:
        seen: set[str] = set()
        queue = list(names)
        while queue:
            n = queue.pop()
            if n in seen or n in image:
                continue
            seen.add(n)
            queue.extend(edges.get(n, ()))
        return seen

    def wheel(name: str) -> Path:
        return download(f"{name}=={pins[name]}", wheels)

    def mib(names: set[str]) -> float:
        return round(sum(wheel(n).stat().st_size for n in names) / 2**20, 2)

    # what import-blocking found needed on 0.20.1's serve path (deps-0.20.1.txt): imports the static reading
    # cannot see (inside functions of modules it does not reach); carried whatever their weight
    needed_before = {canonicalize_name(ln.split("==")[0]) for ln in (HERE / "deps-0.20.1.txt").read_text().splitlines()
                     if ln and not ln.startswith("#")}
    evidence: dict[str, str] = {}
    loaded = []
    for name in direct:
        users = sorted(i for i in external if _provides(i, _wheel_meta(wheel(name))[3]))
        if users:
            loaded.append(name)
            evidence[name] = f"imported when the serve path loads: {', '.join(users[:3])}"
    carried = closure(loaded)
    left_out: list[dict[str, object]] = []
    for name in direct:
        if name in carried:
            continue
        late = sorted(i for i in lazy if _provides(i, _wheel_meta(wheel(name))[3]))
        sites = sorted({m for i in late for m in lazy[i]})
        brings = closure([name]) - carried
        size = mib(brings)
        why = (f"imported only inside functions ({', '.join(sites[:4])}{', ...' if len(sites) > 4 else ''})"
               if late else "never imported on the serve path")
        if size >= LEAVE_OUT_MIB and name not in needed_before:
            left_out.append({"package": name, "version": pins[name], "why": why, "brings": sorted(brings), "MiB": size})
        else:  # cheap, or found needed on 0.20.1's serve path: carried as pip would install it
            carried |= brings
            evidence[name] = (f"{why}; carried ({size} MiB with what it brings)" if name not in needed_before else
                              f"{why} as read statically, but 0.20.1's import-blocked serve path needed it "
                              f"(deps-0.20.1.txt); carried ({size} MiB with what it brings)")
    carried.discard("vllm")
    return {
        "vllm": version,
        "serve_path_modules_read": len(read),
        "third_party_imported": sorted({i.split(".")[0] for i in external}),
        "dependencies": [f"{meta[n]['name']}=={pins[n]}" for n in sorted(carried)],  # type: ignore[index]
        "MiB": mib(carried),
        "left_out": left_out,
        "left_out_MiB": round(sum(float(str(x["MiB"])) for x in left_out), 1),
        "leave_out_threshold_MiB": LEAVE_OUT_MIB,
        "image_checks": image_checks,
        "image_versions_excluded": {n: image[n] for n in conflicts},
        "image_packages_resolved": sorted(set(meta) & set(image)),
        "why": {n: evidence.get(n, "required by " + ", ".join(sorted(p for p in carried if n in edges[p]))[:200])
                for n in sorted(carried)},
    }


def _extras(marker: object) -> list[str]:
    """The extra names a marker mentions (`extra == "standard"`)."""
    text = str(marker)
    return [part.split('"')[1] for part in text.split("extra ==")[1:] if '"' in part]


def write_list(result: dict[str, Any], out: Path) -> None:
    lines = [f"# vLLM {result['vllm']}: its requirements the GPU image lacks (image-packages.txt), as pip resolves them",
             f"# for the image, kept by serve_deps.py's rule (its docstring): {result['MiB']} MiB of wheels.",
             "# The image's versions this release's requirements exclude: "
             + (", ".join(f"{k} {v}" for k, v in result["image_versions_excluded"].items()) or "none"),
             "# Left out, each with what it alone would bring (the sizes overlap), and the evidence:"]
    lines += [f"#   {x['package']} {x['version']}: {x['MiB']} MiB, {x['why']}" for x in result["left_out"]]
    out.write_text("\n".join(lines + list(result["dependencies"])) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("version")
    ap.add_argument("--vllm-site", type=Path, help="vLLM installed with pip --target (default: tests/stacks.py)")
    ap.add_argument("--wheels", type=Path, help="where the wheels are downloaded (default: a temporary directory)")
    ap.add_argument("--out", type=Path, help="the list engine_transfer.py reads (default: deps-VERSION.txt here)")
    ap.add_argument("--json", type=Path, help="the whole reading, left-out packages and image checks included")
    ap.add_argument("--from-json", type=Path, help="write the list from a saved --json reading, resolving nothing")
    args = ap.parse_args()
    out = args.out or HERE / f"deps-{args.version}.txt"
    if args.from_json:
        write_list(json.loads(args.from_json.read_text()), out)
        print(f"wrote {os.path.relpath(out)}")
        return
    site = args.vllm_site
    if site is None:
        sys.path.insert(0, str(ROOT / "tests"))
        from stacks import vllm_site
        site = vllm_site(args.version)
    with tempfile.TemporaryDirectory() as tmp:
        result = resolve(args.version, site, args.wheels or Path(tmp))
    write_list(result, out)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "why"}, indent=1))
    print(f"wrote {os.path.relpath(out)}")


if __name__ == "__main__":
    main()
