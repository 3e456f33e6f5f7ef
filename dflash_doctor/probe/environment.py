# Probe: runs inside the TARGET interpreter, standard library only, Python 3.8+.
# Collects the static facts of the environment without importing any of its packages: the
# interpreter, sys.path, every distribution's metadata and RECORD, who owns which files of the
# flash-attention family, and how `flash_attn` resolves. Prints one JSON document after the marker.
import csv
import email.parser
import hashlib
import importlib.util
import io
import json
import os
import platform
import re
import site
import sys

MARKER = "@@dflash-doctor-facts@@"
ARGS = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
STACK = set(ARGS.get("stack", []))
WATCHED_TOPS = ARGS.get("watched_top_levels", [])  # flash_attn, hopper, flash_attn_2_cuda, ...
VERIFY_HASHES = bool(ARGS.get("verify_hashes", False))
HASH_ALWAYS = set(ARGS.get("hash_always", []))  # small distributions whose every file is hashed
ENV_ALLOW = ARGS.get("env_allow", {})
SPEC_NAMES = ARGS.get("find_spec", [])


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def read_text(path):
    """(text, error): never raises."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        return None, "%s: %s" % (type(exc).__name__, exc.strerror or exc)
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        return None, "not UTF-8 text (%s at byte %d)" % (exc.reason, exc.start)


def file_sha256(path):
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    import base64

    return "sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


# ---------------------------------------------------------------- the interpreter


def pyvenv_cfg():
    path = os.path.join(sys.prefix, "pyvenv.cfg")
    text, _ = read_text(path)
    if text is None:
        return None
    cfg = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            cfg[key.strip()] = value.strip()
    return cfg


def env_kind(cfg):
    if cfg is not None and "uv" in cfg:
        return "uv"
    if os.path.isdir(os.path.join(sys.prefix, "conda-meta")):
        return "conda"
    if sys.prefix != getattr(sys, "base_prefix", sys.prefix) or cfg is not None:
        return "venv"
    return "system"


def environ_facts():
    names = sorted(os.environ)
    exact = set(ENV_ALLOW.get("names", []))
    prefixes = tuple(ENV_ALLOW.get("prefixes", []))
    secret = re.compile(ENV_ALLOW.get("secret_pattern", "(?!)"), re.I)
    values = {}
    for name in names:
        if secret.search(name):
            continue
        if name in exact or name.startswith(prefixes):
            values[name] = os.environ[name]
    return {"names": names, "values": values}


def marker_environment():
    impl = sys.implementation
    version = "%d.%d.%d" % impl.version[:3]
    if impl.version.releaselevel != "final":
        version += impl.version.releaselevel[0] + str(impl.version.serial)
    return {
        "implementation_name": impl.name,
        "implementation_version": version,
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "platform_python_implementation": platform.python_implementation(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    }


def classify_path(entry, pythonpath, stdlib_dirs, site_dirs, user_site):
    if entry == "":
        return "cwd"
    real = os.path.realpath(entry)
    if real == os.path.realpath(os.getcwd()):
        return "cwd"
    if any(real == os.path.realpath(p) for p in pythonpath):
        return "pythonpath"
    if user_site and real == os.path.realpath(user_site):
        return "user-site"
    if any(real == os.path.realpath(p) for p in site_dirs):
        return "site"
    if any(real == os.path.realpath(p) for p in stdlib_dirs):
        return "stdlib"
    return "other"


def target_facts():
    import importlib.machinery
    import sysconfig

    cfg = pyvenv_cfg()
    libc_name, libc_version = platform.libc_ver()
    try:
        user_site = site.getusersitepackages()
    except Exception:
        user_site = None
    return {
        "executable": sys.executable,
        "python_version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        # The file names this interpreter imports extension modules from, and its ABI tag: an extension
        # named for another one (X.cpython-312-x86_64-linux-gnu.so on 3.11) is invisible to its import system.
        "extension_suffixes": list(importlib.machinery.EXTENSION_SUFFIXES),
        "soabi": sysconfig.get_config_var("SOABI"),
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "env_kind": env_kind(cfg),
        "pyvenv_cfg": cfg,
        "libc": {"name": libc_name, "version": libc_version},
        "cwd": os.getcwd(),
        "user_site": user_site,
        "user_site_enabled": bool(site.ENABLE_USER_SITE),
        "environ": environ_facts(),
        "marker_environment": marker_environment(),
    }


def sys_path_facts(user_site):
    import sysconfig

    pythonpath = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    paths = sysconfig.get_paths()
    stdlib_dirs = [paths.get("stdlib", ""), paths.get("platstdlib", "")]
    site_dirs = [paths.get("purelib", ""), paths.get("platlib", "")]
    try:
        site_dirs += site.getsitepackages()
    except Exception:
        pass
    return [
        {
            "path": entry,
            "kind": classify_path(entry, pythonpath, stdlib_dirs, site_dirs, user_site),
            "exists": os.path.isdir(entry or "."),
        }
        for entry in sys.path
    ]


# ---------------------------------------------------------------- distributions


def parse_metadata(dist_dir, is_egg):
    meta_path = os.path.join(dist_dir, "PKG-INFO" if is_egg else "METADATA")
    text, error = read_text(meta_path)
    if text is None:
        return None, {"file": meta_path, "error": error}
    try:
        message = email.parser.Parser().parsestr(text)
    except Exception as exc:  # email is lenient, but be sure
        return None, {"file": meta_path, "error": "unparseable: %s" % exc}
    name, version = message.get("Name"), message.get("Version")
    if not name or not version:
        return None, {"file": meta_path, "error": "no Name or Version field"}
    return message, None


def parse_record(dist_dir):
    """(rows, error): rows are (path, hash, size) with size None when absent."""
    path = os.path.join(dist_dir, "RECORD")
    if not os.path.exists(path):
        return None, None
    text, error = read_text(path)
    if text is None:
        return None, {"file": path, "error": error}
    rows = []
    try:
        for lineno, row in enumerate(csv.reader(io.StringIO(text)), 1):
            if not row:
                continue
            if len(row) != 3:
                return None, {"file": path, "error": "line %d has %d fields, expected 3" % (lineno, len(row))}
            file_path, file_hash, size = row
            if size and not size.isdigit():
                return None, {"file": path, "error": "line %d: size %r is not a number" % (lineno, size)}
            rows.append((file_path, file_hash, int(size) if size else None))
    except csv.Error as exc:
        return None, {"file": path, "error": "malformed CSV: %s" % exc}
    return rows, None


def direct_url(dist_dir):
    text, _ = read_text(os.path.join(dist_dir, "direct_url.json"))
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


def top_of(rel_path):
    head = rel_path.replace("\\", "/").split("/", 1)[0]
    return head


def record_integrity(location, rows, hash_all):
    """Compare RECORD with the disk. Returns counts and the (capped) list of mismatches."""
    missing, size_mismatch, hash_mismatch = [], [], []
    checked = 0
    for rel, rec_hash, size in rows:
        if rel.endswith(".pyc") or not rec_hash:
            continue  # bytecode is derived; RECORD and directory rows carry no hash
        full = os.path.normpath(os.path.join(location, rel))
        try:
            actual_size = os.stat(full).st_size
        except OSError:
            missing.append(rel)
            continue
        checked += 1
        if size is not None and actual_size != size:
            size_mismatch.append({"path": rel, "record": size, "disk": actual_size})
            continue
        if hash_all and rec_hash.startswith("sha256="):
            disk = file_sha256(full)
            if disk != rec_hash:
                hash_mismatch.append({"path": rel})
    cap = 50
    return {
        "files": len(rows),
        "checked": checked,
        "hashed": bool(hash_all),
        "missing": missing[:cap],
        "missing_count": len(missing),
        "size_mismatch": size_mismatch[:cap],
        "size_mismatch_count": len(size_mismatch),
        "hash_mismatch": hash_mismatch[:cap],
        "hash_mismatch_count": len(hash_mismatch),
    }


def watched_claims(location, rows):
    """Files this distribution claims under the watched top-level names, with disk state."""
    claims = []
    for rel, rec_hash, size in rows:
        top = top_of(rel)
        base = top.split(".", 1)[0]
        if top not in WATCHED_TOPS and base not in WATCHED_TOPS:
            continue
        if rel.endswith(".pyc") or "__pycache__" in rel:
            continue
        full = os.path.normpath(os.path.join(location, rel))
        claims.append({"path": rel, "hash": rec_hash or None, "size": size, "disk_hash": file_sha256(full)})
    return claims


# PEP 3149 / PEP 384 tags in an extension's file name: cpython-311-x86_64-linux-gnu, cpython-313t-...,
# pypy39-pp73-..., abi3, cp311-win_amd64.
FOREIGN_ABI_TAG = re.compile(r"\.((?:cpython-|cp|pypy|graalpy)\d+[-\w]*|abi3)$")


def wheel_tags(dist_dir):
    """The `Tag:` lines of the dist-info's WHEEL file (what the installed wheel was built for); None when absent."""
    path = os.path.join(dist_dir, "WHEEL")
    try:
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as handle:
            raw = handle.read(65536)
    except OSError:
        return None
    text = raw.decode("utf-8", "replace")
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Tag:")][:64]


def compiled_files(rows):
    """Extension modules (importable, with their module names) and other shared libraries."""
    import importlib.machinery

    suffixes = sorted(importlib.machinery.EXTENSION_SUFFIXES, key=len, reverse=True)
    extensions, libraries = [], []
    for rel, _, _ in rows:
        if not (rel.endswith(".so") or ".so." in rel or rel.endswith(".pyd")):
            continue
        if rel.startswith("..") or rel.split("/", 1)[0].endswith(".data"):
            libraries.append(rel)
            continue
        suffix = next((s for s in suffixes if rel.endswith(s)), None)
        base = os.path.basename(rel)
        if suffix and not base.startswith("lib"):
            stem = rel[: -len(suffix)]
            # Only the bare ".so" matched: a tag left in the stem names another interpreter's ABI
            # (_C.cpython-312-x86_64-linux-gnu.so seen from 3.11). The module is `_C`, not `_C.cpython-312-...`.
            foreign = FOREIGN_ABI_TAG.search(stem) if suffix in (".so", ".pyd") else None
            module = (stem[: foreign.start()] if foreign else stem).replace("/", ".")
            extension = {"path": rel, "module": module}
            if foreign:
                extension["abi_tag"] = foreign.group(1)
            extensions.append(extension)
        else:
            libraries.append(rel)
    return extensions, libraries


def scan_distributions():
    dists = []
    seen_dirs = set()
    for entry in sys.path:
        if entry == "" or os.path.realpath(entry) == os.path.realpath(os.getcwd()):
            # The working directory is on sys.path only for `python -c` and `python -m`, not for the
            # `vllm` console script; a source checkout's egg-info there is not part of the environment.
            # (Import shadowing from it is still judged, from the resolution facts.)
            continue
        location = entry
        try:
            names = sorted(os.listdir(location))
        except OSError:
            continue
        real_location = os.path.realpath(location)
        if real_location in seen_dirs:
            continue
        seen_dirs.add(real_location)
        for child in names:
            is_egg = child.endswith(".egg-info")
            if not (child.endswith(".dist-info") or is_egg):
                continue
            dist_dir = os.path.join(location, child)
            if not os.path.isdir(dist_dir):
                continue
            dists.append(describe_distribution(location, dist_dir, is_egg))
    return dists


def describe_distribution(location, dist_dir, is_egg):
    fact = {"location": location, "dist_info": dist_dir, "format": "egg-info" if is_egg else "dist-info"}
    message, meta_error = parse_metadata(dist_dir, is_egg)
    if meta_error:
        guess = os.path.basename(dist_dir).rsplit(".", 1)[0].split("-")
        fact.update({"name": guess[0], "version": guess[1] if len(guess) > 1 else None, "metadata_error": meta_error})
    else:
        fact.update({
            "name": message["Name"],
            "version": message["Version"],
            "requires": message.get_all("Requires-Dist") or [],
            "requires_python": message.get("Requires-Python"),
        })
    canon = canonical(fact["name"])
    fact["canonical"] = canon
    installer, _ = read_text(os.path.join(dist_dir, "INSTALLER"))
    fact["installer"] = installer.strip() if installer else None
    url = direct_url(dist_dir)
    fact["editable"] = bool(url and url.get("dir_info", {}).get("editable"))
    fact["direct_url"] = url.get("url") if url else None
    rows, record_error = (None, None) if is_egg else parse_record(dist_dir)
    fact["record"] = {"present": rows is not None, "error": record_error}
    if rows is not None:
        fact["record"]["files"] = len(rows)
        fact["top_levels"] = sorted({top_of(r[0]) for r in rows if not top_of(r[0]).endswith((".dist-info", ".data")) and top_of(r[0]) not in ("..", "__pycache__")})
        claims = watched_claims(location, rows)
        if claims:
            fact["claims"] = claims
        if canon in STACK:
            fact["record"]["integrity"] = record_integrity(location, rows, VERIFY_HASHES or canon in HASH_ALWAYS)
            fact["extensions"], fact["libraries"] = compiled_files(rows)
            if any("abi_tag" in ext for ext in fact["extensions"]):
                fact["wheel_tags"] = wheel_tags(dist_dir)
    return fact


# ---------------------------------------------------------------- import resolution (no import)


def portions(name):
    """Every sys.path entry that holds something importable as top-level `name`, in path order."""
    found = []
    for index, entry in enumerate(sys.path):
        base = entry or os.getcwd()
        pkg = os.path.join(base, name)
        if os.path.isfile(os.path.join(pkg, "__init__.py")):
            found.append({"index": index, "entry": entry, "kind": "package", "path": pkg})
        elif os.path.isdir(pkg):
            found.append({"index": index, "entry": entry, "kind": "namespace-portion", "path": pkg})
        if os.path.isfile(pkg + ".py"):
            found.append({"index": index, "entry": entry, "kind": "module", "path": pkg + ".py"})
        try:
            for child in os.listdir(base):
                if child.startswith(name + ".") and child.endswith((".so", ".pyd")):
                    found.append({"index": index, "entry": entry, "kind": "extension", "path": os.path.join(base, child)})
        except OSError:
            pass
    return found


def resolve(name):
    try:
        spec = importlib.util.find_spec(name)
    except Exception as exc:  # a broken finder on the path is itself a fact
        return {"found": False, "error": "%s: %s" % (type(exc).__name__, exc)}
    if spec is None:
        return {"found": False}
    locations = list(spec.submodule_search_locations or []) if spec.submodule_search_locations is not None else None
    is_namespace = spec.submodule_search_locations is not None and spec.origin in (None, "namespace")
    return {
        "found": True,
        "origin": spec.origin if spec.origin != "namespace" else None,
        "namespace": is_namespace,
        "search_locations": locations,
    }


def main():
    target = target_facts()
    facts = {
        "target": target,
        "sys_path": sys_path_facts(target["user_site"]),
        "distributions": scan_distributions(),
        "resolution": {name: dict(resolve(name), portions=portions(name)) for name in SPEC_NAMES},
    }
    sys.stdout.write("\n" + MARKER + json.dumps(facts) + "\n")


main()
