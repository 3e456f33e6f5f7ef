"""What of the user's environment may appear in a report.

Reports go into bug tickets and CI logs, so every output is redacted by default:

- Environment variables are listed by name; values are kept only for an allow-list of settings that
  decide how the stack behaves, and never for a name that looks like a key or token (the probe applies
  this, through `env_allow_args`), nor for a value shaped like one (`scrub_values`).
- Every secret the doctor was given is masked by its value, wherever it appears in any output (a server's
  401 answer that echoes the key, a log line, a traceback): the values of the serve command's secret flags
  as vLLM's parser reads them (every value of `--api-key K1 K2`, a prefix such as `--api-k K`, `--flag=V`, an
  unknown flag whose name says secret such as `--api-keys K`; where vLLM imports, also what its own parser
  bound to a secret destination) and of secret-named keys in its JSON values (`"api_key"`), the variable
  `--api-key-env` names, and the environment's variables whose names say secret (`facts.secrets`). Each in
  every form a quoted error can give it (`encodings`: Python's repr, a JSON string, URL percent-encoding, shell
  quoting), all in one pass over each string (`SecretMask`); a string cut short before it was masked (a
  probe's stderr kept by its ends) has a secret's start at a cut's near side and its end at the far side masked too.
- Whatever still slips into a string anywhere in a report (a command line, a URL, a traceback) is
  scrubbed by `Redactor`: credential-shaped values (`hf_...`, `sk-...`, `ghp_...`, bearer tokens, URLs
  with a password, `NAME=value` and `--token VALUE` where the name says secret), the user's home
  directory (as `~`) and user name in paths, and, unless `keep_hosts`, this machine's host names (as a
  stable pseudonym, `host-1a2b3c4d`, so that a fleet's hosts stay distinguishable), IP addresses and
  the hosts of URLs that are not well-known public services.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import re
import socket
import threading
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import field
from functools import lru_cache
from typing import Any

from dflash_doctor.facts.secrets import (
    ENV_ALLOW_NAMES,
    ENV_ALLOW_PREFIXES,
    MIN_SECRET_CHARS,
    REDACTED,
    SECRET_FLAG_NAME,
    SECRET_FLAGS,
    SECRET_NAME,
    SECRET_VALUE,
    argv_secret_spans,
    argv_secret_values,
    bound_secret_values,
    env_allow_args,
    environ_secret_values,
    scrub_values,
    secret_flag,
    secret_key,
    secret_nargs,
)
from dflash_doctor.facts.serve.serve_shapes import ServeArgs
from dflash_doctor.shape import frozen_dataclass

__all__ = [
    "ENV_ALLOW_NAMES",
    "ENV_ALLOW_PREFIXES",
    "SECRET_NAME",
    "SECRET_VALUE",
    "Redactor",
    "SecretMask",
    "argv_secrets",
    "encodings",
    "env_allow_args",
    "given_secrets",
    "host_pseudonym",
    "redact_report",
    "scrub_values",
    "secret_flag",
    "secret_values",
    "this_hosts",
]


# Token shapes, replaced wherever they occur (URL credentials are handled first, keeping the URL).
_TOKEN = re.compile(
    r"hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_\-]{16,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|xox[abprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"
)
_BEARER = re.compile(r"(?i)\b(bearer)(\s+)[A-Za-z0-9._~+/=\-]{16,}")
_URL_CREDENTIALS = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s:@<>]+(?::[^/\s@]*)?@")
# NAME=value where NAME says secret: HF_TOKEN=..., NCCL_AUTH: ... (environment style, upper case), and
# api_key=... (config style, lower case, `=` only: "KeyError: x" and "tokenizer: y" are prose).
_SECRET_ENV_ASSIGNMENT = re.compile(
    r"\b([A-Z0-9_]*(?:KEY|TOKEN(?!S|IZER)|SECRET|PASSW|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE)[A-Z0-9_]*)(\s*[=:]\s*)(['\"]?)(?!<)([^\s'\",;]+)"
)
_SECRET_CONFIG_ASSIGNMENT = re.compile(
    r"\b([a-z0-9_]*(?:api_key|access_key|secret|token(?!s|izer)|password|passwd|credential)[a-z0-9_]*)(\s*=\s*)(['\"]?)(?!<)([^\s'\",;]+)"
)
# A secret flag and its value in one string: a name that says secret (facts.secrets.SECRET_FLAG_NAME), or a
# prefix of a known secret flag that vLLM's parser would take for it (`--api-k K`, `--hf_tok=T`).
_FLAG_PREFIXES = "|".join(sorted({"--" + re.escape(f[2:n]).replace("\\-", "[-_]") for f in SECRET_FLAGS
                                  for n in range(4, len(f))}, key=len, reverse=True))
_SECRET_FLAG = re.compile(rf"(?i)(?<![\w-])({SECRET_FLAG_NAME}|{_FLAG_PREFIXES})(=|\s+)(?![-<])(\S+)")
# "key": "value" in JSON (or a Python dict's repr) where the key names a secret (facts.secrets.secret_key).
_QUOTED_PAIR = re.compile(r"""(["'])([A-Za-z0-9_.-]{2,64})\1(\s*:\s*)(["'])((?:(?!\4)[^\\]|\\.)*)\4""")
_ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
_SECRET_NAME_RE = re.compile(SECRET_NAME, re.IGNORECASE)

# Not after a version operator, a dash or an underscore (nvidia-curand-cu12==10.3.9.90,
# nvidia_curand_cu12-10.3.9.90.dist-info): those are versions.
_IPV4 = re.compile(
    r"(?<![\w.<>+\-])(?<![=<>!~]=)((?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(?:\.(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3})(?!\w|\.\w)"
)
_IPV6 = re.compile(
    r"(?<![\w:.])("
    r"(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}"
    r"|(?:[0-9A-Fa-f]{1,4}:){1,6}(?::[0-9A-Fa-f]{1,4}){1,6}"
    r"|(?:[0-9A-Fa-f]{1,4}:){1,7}:"
    r"|:(?::[0-9A-Fa-f]{1,4}){1,7}"
    r")(?:%\w+)?(?![\w:])"
)
_KEEP_IPS = {"127.0.0.1", "0.0.0.0", "::1", "::", "255.255.255.255"}
_URL_HOST = re.compile(r"(?i)\b((?:https?|grpc|ray|wss?|s3|gs|redis|ftp)://(?:<redacted>@)?)([A-Za-z0-9.-]+)")
PUBLIC_HOSTS = frozenset({
    "pypi.org", "files.pythonhosted.org", "download.pytorch.org", "github.com", "raw.githubusercontent.com",
    "objects.githubusercontent.com", "huggingface.co", "docs.nvidia.com", "developer.nvidia.com",
    "pypi.nvidia.com", "docs.vllm.ai", "wheels.vllm.ai", "flashinfer.ai", "docs.ray.io", "docs.github.com",
    "localhost",
})
# Values under these keys are identifiers or versions, never hosts; "1.2.3.4" there is a version.
_NOT_HOSTS = re.compile(r"(?i)(version|(^|_)ids?$|hash|sha256|digest|fingerprint|created|schema)")
# Lines that name distributions and their versions beside paths (a fix's `changes`: "install nvidia-cudnn-cu12
# 9.1.0.70 (wheel)"): a dotted quad there is a version, while a path in them may still hold a host name.
_VERSION_LINES = frozenset({"changes"})

_DOTTED_DIGITS = re.compile(r"\d\.\d")
_TOKEN_PREFIXES = ("hf_", "sk-", "gh", "xox", "AKIA", "eyJ")
_HOME_ELSEWHERE = re.compile(r"(?<![\w.-])(/home|/Users)/(?!<user>)[^/\s'\"]+")


def host_pseudonym(name: str) -> str:
    """A stable stand-in for a host name: the same host reads the same in every report."""
    return "host-" + hashlib.sha256(name.strip().lower().encode()).hexdigest()[:8]


def _this_user() -> str | None:
    for candidate in (os.environ.get("USER"), os.environ.get("LOGNAME")):
        if candidate:
            return candidate
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry in a container: nothing to hide
        return None


def _with_short_names(names: Iterable[str]) -> set[str]:
    found = {n for n in names if n}
    found |= {n.split(".", 1)[0] for n in found if not _IPV4.fullmatch(n)}
    return {n for n in found if len(n) >= 2 and n.lower() not in ("localhost", "localhost.localdomain")}


_HOSTS_LOCK = threading.Lock()
_hosts: tuple[str, ...] | None = None


def this_hosts() -> tuple[str, ...]:
    """This machine's host names, as the redaction hides them: asked once a process (`socket.getfqdn` asks the
    resolver, which on a machine whose DNS is down answers after its timeout), by whoever asks first; a run asks
    while it collects (`commands.output.prepare`), not when it writes its report."""
    global _hosts
    with _HOSTS_LOCK:
        if _hosts is None:
            names: set[str] = set()
            for get in (socket.gethostname, socket.getfqdn):
                try:
                    name = get()
                except OSError:
                    continue
                if name:
                    names.add(name)
                    names.add(name.split(".", 1)[0])
            _hosts = tuple(sorted(_with_short_names(names)))
        return _hosts


@frozen_dataclass(frozen=True)
class Redactor:
    homes: tuple[str, ...] = ()
    user: str | None = None
    hosts: tuple[str, ...] = ()
    keep_hosts: bool = False
    values: tuple[str, ...] = ()
    """Secrets the doctor was given, masked wherever they appear, in every encoding (`SecretMask`)."""
    _patterns: dict[str, re.Pattern[str]] = field(default_factory=dict, compare=False, repr=False)
    _masks: list[SecretMask] = field(default_factory=list, compare=False, repr=False)  # built once, on first use
    # A report repeats the same paths and titles thousands of times; each distinct string is scrubbed once.
    _memo: dict[tuple[str, bool, bool], str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def for_this_machine(cls, keep_hosts: bool = False, extra_hosts: Iterable[str] = (),
                         secrets: Iterable[str] = ()) -> Redactor:
        """This machine's home, user and host names, the secrets in its environment
        (`facts.secrets.environ_secret_values`) and `secrets` (what the doctor was given: `given_secrets`)."""
        homes: set[str] = set()
        for home in (os.environ.get("HOME"), os.path.expanduser("~")):
            if home and home not in ("/", ""):
                homes.add(home.rstrip("/"))
                homes.add(os.path.realpath(home).rstrip("/"))
        user = _this_user()
        return cls(
            homes=tuple(sorted((h for h in homes if h), key=len, reverse=True)),
            user=user if user and len(user) >= 2 else None,
            hosts=tuple(sorted({*this_hosts(), *_with_short_names(extra_hosts)}, key=len, reverse=True)),
            keep_hosts=keep_hosts,
            values=secret_values([*secrets, *environ_secret_values(os.environ)]),
        )

    def _compiled(self) -> dict[str, re.Pattern[str]]:
        if not self._patterns:
            pats = self._patterns
            if self.homes:
                pats["home"] = re.compile("(?<![\\w.-])(" + "|".join(re.escape(h) for h in self.homes) + ")(?=/|$|[\\s'\":;,)])")
            if self.user:
                u = re.escape(self.user)
                pats["user"] = re.compile(rf"(?<=/){u}(?=/|$|[\s'\":;,)])|(?<![\w.-]){u}(?=@)")
            if self.hosts:
                pats["host"] = re.compile(
                    "(?i)(?<![\\w-])(" + "|".join(re.escape(h) for h in self.hosts) + ")(?![\\w-]|\\.[A-Za-z0-9])"
                )
        return self._patterns

    def _mask(self) -> SecretMask | None:
        if not self.values:
            return None
        if not self._masks:
            self._masks.append(SecretMask(self.values))
        return self._masks[0]

    # ---------------------------------------------------------------------------------------- strings

    def secrets(self, text: str) -> str:
        def keep_name(m: re.Match[str]) -> str:
            return m.group(1) + m.group(2) + m.group(3) + REDACTED

        def quoted_pair(m: re.Match[str]) -> str:
            if not secret_key(m.group(2)) or not m.group(5) or m.group(5) == REDACTED:
                return m.group(0)
            return m.group(1) + m.group(2) + m.group(1) + m.group(3) + m.group(4) + REDACTED + m.group(4)

        mask = self._mask()
        if mask is not None:
            text = mask(text)

        # Each pattern runs only where its trigger is in the text: most strings of a report hold none.
        if "@" in text and "://" in text:
            text = _URL_CREDENTIALS.sub(lambda m: m.group(1) + REDACTED + "@", text)
        if any(prefix in text for prefix in _TOKEN_PREFIXES):
            text = _TOKEN.sub(REDACTED, text)
        if "earer" in text or "EARER" in text:
            text = _BEARER.sub(lambda m: m.group(1) + m.group(2) + REDACTED, text)
        if "--" in text:
            text = _SECRET_FLAG.sub(lambda m: m.group(1) + m.group(2) + REDACTED if secret_nargs(m.group(1)) else m.group(0),
                                    text)
        if "=" in text or ":" in text:
            text = _SECRET_ENV_ASSIGNMENT.sub(keep_name, text)
        if "=" in text:
            text = _SECRET_CONFIG_ASSIGNMENT.sub(keep_name, text)
        if ":" in text and ('"' in text or "'" in text):
            text = _QUOTED_PAIR.sub(quoted_pair, text)
        return text

    def text(self, text: str, host_safe: bool = False, versions: bool = False) -> str:
        """Scrub one string. `host_safe`: the value is a version or an id, leave addresses alone. `versions`:
        its dotted quads are versions, not IPv4 addresses (host names are still scrubbed)."""
        if not text:
            return text
        key = (text, host_safe, versions)
        done = self._memo.get(key)
        if done is None:
            done = self._memo[key] = self._scrub(text, host_safe, versions)
        return done

    def _scrub(self, text: str, host_safe: bool, versions: bool = False) -> str:
        text = self.secrets(text)
        pats = self._compiled()
        if "home" in pats and any(home in text for home in self.homes):
            text = pats["home"].sub("~", text)
        if "/home/" in text or "/Users/" in text:
            text = _HOME_ELSEWHERE.sub(lambda m: m.group(1) + "/<user>", text)
        if "user" in pats and self.user and self.user in text:
            text = pats["user"].sub("<user>", text)
        if self.keep_hosts or host_safe:
            return text
        if "host" in pats:
            lowered = text.lower()
            if any(host.lower() in lowered for host in self.hosts):
                text = pats["host"].sub(lambda m: host_pseudonym(m.group(1)), text)
        if "://" in text:
            text = _URL_HOST.sub(lambda m: m.group(1) + (m.group(2) if _public(m.group(2)) else "<host>"), text)
        if not versions and _DOTTED_DIGITS.search(text):
            text = _IPV4.sub(lambda m: m.group(1) if m.group(1) in _KEEP_IPS else "<ip>", text)
        if "::" in text or text.count(":") >= 2:
            text = _IPV6.sub(lambda m: m.group(0) if m.group(1) in _KEEP_IPS or not _looks_ipv6(m.group(1)) else "<ip>",
                             text)
        return text

    # ---------------------------------------------------------------------------------------- trees

    def tree(self, value: Any, key: str = "") -> Any:
        """A redacted deep copy of JSON-like data (keys are scrubbed too: paths are often keys)."""
        if isinstance(value, str):
            secret, host_safe, versions = _key_says(key)
            if secret and value:
                return REDACTED
            return self.text(value, host_safe=host_safe, versions=versions)
        if isinstance(value, Mapping):
            return {(self.text(k) if isinstance(k, str) else k): self.tree(v, k if isinstance(k, str) else key)
                    for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.tree(v, key) for v in argv_secrets(value)]
        return value


@lru_cache(maxsize=4096)
def _key_says(key: str) -> tuple[bool, bool, bool]:
    """What the key a string is found under says of it: (a secret: masked whole, host-safe: a version or an id,
    its dotted quads versions). Once a key: a report repeats a few hundred keys over twenty thousand strings."""
    if not key:
        return False, False, False
    secret = bool(_ENV_NAME.match(key) and _SECRET_NAME_RE.search(key)) or bool(secret_key(key))
    return secret, bool(_NOT_HOSTS.search(key)), key in _VERSION_LINES


def secret_values(values: Iterable[str]) -> tuple[str, ...]:
    """The secrets to mask by value: distinct, long enough not to mask ordinary words (MIN_SECRET_CHARS), never
    the mask itself, longest first (a key that contains another is masked whole)."""
    kept = {v for v in values if isinstance(v, str) and len(v.strip()) >= MIN_SECRET_CHARS and v != REDACTED}
    return tuple(sorted(kept, key=lambda v: (-len(v), v)))


def given_secrets(argv: Sequence[str] | None = None, key_env: str | None = None,
                  sections: Mapping[str, object] | None = None) -> list[str]:
    """What the doctor was given that is a secret: the serve command line's, as vLLM's parser would read it
    (`facts.secrets.argv_secret_values`) and, in `sections` (a run's facts), as the installed vLLM's own parser
    did (`facts.secrets.bound_secret_values`); and the value of the variable that `--api-key-env` names."""
    found = argv_secret_values(argv or [])
    serve_args = ServeArgs.read((sections or {}).get(ServeArgs.SECTION))
    if serve_args is not None:
        found += bound_secret_values(serve_args)
    if key_env:
        found += environ_secret_values(os.environ, [key_env])
    return found


def argv_secrets(words: list[Any] | tuple[Any, ...]) -> list[Any]:
    """A command line (any list of words) with each secret word replaced as vLLM's parser would bind it
    (`facts.secrets.argv_secret_spans`): `--api-key VALUE` is two words, so no single string shows that VALUE
    is a secret; each word after a flag that takes a list (`--api-key K1 K2`) up to the next flag; the value of
    `--api-k=VALUE`, keeping the flag. Whatever its length: a short secret is masked here too."""
    out = list(words)
    for at, value in argv_secret_spans(out):
        word = out[at]
        out[at] = REDACTED if word == value else word[: len(word) - len(value)] + REDACTED
    return out


# ------------------------------------------------------------------------------------------- secret values

# Escapings an error message or a report applies to a string: Python's repr (either quote; ascii() escapes all but
# ASCII) and a JSON string. Each is applied once, and twice where that happens (a repr inside a repr: an
# exception's repr quoting vLLM's message; a repr inside a JSON string).


def _repr_single(text: str) -> str:
    return repr(text + '"')[1:-2]  # with a `"` in it, repr quotes with `'`: `'` and `\\` escaped


def _repr_double(text: str) -> str:
    return _requoted(_repr_single(text))


def _ascii_single(text: str) -> str:
    return ascii(text + '"')[1:-2]


def _ascii_double(text: str) -> str:
    return _requoted(_ascii_single(text))


def _requoted(single: str) -> str:
    """A repr's inside as it reads between `"`: `\\'` is `'`, `"` is `\\"`."""
    if "'" not in single and '"' not in single:
        return single
    return _REPR_QUOTES.sub(lambda m: '\\"' if m.group(0) == '"' else "'" if m.group(0) == "\\'" else m.group(0), single)


def _json_string(text: str) -> str:
    return json.dumps(text)[1:-1]


def _json_unicode(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


_REPR_QUOTES = re.compile(r"\\.|\"")
_ONCE: tuple[Callable[[str], str], ...] = (_repr_single, _repr_double, _ascii_single, _ascii_double, _json_string,
                                           _json_unicode)
_TWICE: tuple[Callable[[str], str], ...] = (_repr_single, _repr_double, _json_string)
_PERCENT = re.compile(r"%[0-9A-F]{2}")
# No encoding changes these characters: a secret made of them only has one form (the usual key).
_PLAIN = re.compile(r"[A-Za-z0-9_.~-]*")


def encodings(secret: str) -> set[str]:
    """Every form in which an error message or a report may show `secret`: as it is; escaped as Python's repr
    and a JSON string do it, once or twice (backslashes doubled, then doubled again); URL percent-encoded
    (`urllib.parse.quote` with and without `/` kept, `quote_plus`, in upper- or lower-case hex); shell-quoted
    (`shlex.quote`'s `'"'"'` and the doctor's own `'\\''` for a quote). At most 33 forms; a secret of letters,
    digits and `_.~-` has one."""
    if _PLAIN.fullmatch(secret):
        return {secret}
    once = {escape(secret) for escape in _ONCE}
    forms = {secret, *once}
    forms |= {escape(form) for form in once - {secret} for escape in _TWICE}
    percent = urllib.parse.quote(secret, safe="")  # the others differ in `/` and ` ` alone
    for encoded in (percent, percent.replace("%2F", "/")):
        for spaced in (encoded, encoded.replace("%20", "+")):
            forms |= {spaced, _PERCENT.sub(lambda m: m.group(0).lower(), spaced)}
    if "'" in secret:
        forms |= {secret.replace("'", "'\"'\"'"), secret.replace("'", "'\\''")}
    return forms


class SecretMask:
    """Masks every encoding (`encodings`) of each secret in a string, in one pass: at each place the longest form
    that starts there is replaced by REDACTED, and the scan goes on after it.

    Few forms go into one compiled alternation, longest first. Many (50,000 keys given to `--api-key`) are found
    through an index of their first MIN_SECRET_CHARS characters (every form is at least that long), then of their
    lengths: per character of the string one dict look-up, and where that finds forms, one set look-up per length
    of the forms that start so, longest first. Built once per run; the work is linear in the secrets' length and in
    the strings' length, whatever their number."""

    ALTERNATION_MOST = 64
    EDGES_MOST = 1 << 16  # characters of all forms together, past which the sides of a cut are not looked at

    def __init__(self, secrets: Iterable[str]) -> None:
        forms = {form for secret in secrets if len(secret) >= MIN_SECRET_CHARS for form in encodings(secret)}
        self.forms = len(forms)
        self._pattern: re.Pattern[str] | None = None
        self._index: dict[str, list[tuple[int, frozenset[str]]]] = {}
        # A probe's stderr, kept by its two ends before it was masked, may hold a secret's start before the cut and
        # its end after it: those pieces, at least MIN_SECRET_CHARS long.
        self._heads: set[str] = set()
        self._tails: set[str] = set()
        self._longest = max((len(f) for f in forms), default=0)
        if sum(len(f) for f in forms) <= self.EDGES_MOST:
            for form in forms:
                self._heads.update(form[:n] for n in range(MIN_SECRET_CHARS, len(form)))
                self._tails.update(form[-n:] for n in range(MIN_SECRET_CHARS, len(form)))
        if len(forms) <= self.ALTERNATION_MOST:
            ordered = sorted(forms, key=lambda f: (-len(f), f))
            self._pattern = re.compile("|".join(re.escape(f) for f in ordered)) if ordered else None
            return
        by_start: dict[str, dict[int, set[str]]] = {}
        for form in forms:
            by_start.setdefault(form[:MIN_SECRET_CHARS], {}).setdefault(len(form), set()).add(form)
        self._index = {start: sorted(((n, frozenset(f)) for n, f in lengths.items()), reverse=True)
                       for start, lengths in by_start.items()}

    def __call__(self, text: str) -> str:
        text = self._whole(text)
        if not self._heads or "characters trimmed" not in text:
            return text
        parts = _TRIMMED.split(text)  # text, marker, text, ...: each marker is a cut between its neighbours
        for at in range(1, len(parts), 2):
            parts[at - 1], parts[at + 1] = self._cut_start(parts[at - 1]), self._cut_end(parts[at + 1])
        return "".join(parts)

    def _cut_start(self, before: str) -> str:
        """`before` (what a cut kept before it) with a secret's start at its end masked."""
        for n in range(min(self._longest - 1, len(before)), MIN_SECRET_CHARS - 1, -1):
            if before[len(before) - n:] in self._heads:
                return before[:len(before) - n] + REDACTED
        return before

    def _cut_end(self, after: str) -> str:
        """`after` (what a cut kept after it) with a secret's end at its start masked."""
        for n in range(min(self._longest - 1, len(after)), MIN_SECRET_CHARS - 1, -1):
            if after[:n] in self._tails:
                return REDACTED + after[n:]
        return after

    def _whole(self, text: str) -> str:
        if self._pattern is not None:
            return self._pattern.sub(REDACTED, text)
        if not self._index:
            return text
        index, width = self._index, MIN_SECRET_CHARS
        pieces: list[str] = []
        kept = at = 0
        last = len(text) - width
        while at <= last:
            lengths = index.get(text[at : at + width])
            if lengths is not None:
                found = next((n for n, forms in lengths if text[at : at + n] in forms), 0)
                if found:
                    pieces += (text[kept:at], REDACTED)
                    at = kept = at + found
                    continue
            at += 1
        if not pieces:
            return text
        pieces.append(text[kept:])
        return "".join(pieces)


# What the probes write where they cut a stream to its two ends (facts.probes._trim, probes/target_process.py).
_TRIMMED = re.compile(r"(\n\[\.\.\. \d+ characters trimmed \.\.\.\]\n)")


def _public(host: str) -> bool:
    host = host.lower().rstrip(".")
    return host in PUBLIC_HOSTS or any(host.endswith("." + p) for p in PUBLIC_HOSTS if p != "localhost") \
        or host in _KEEP_IPS


def _looks_ipv6(candidate: str) -> bool:
    # "::" joins C++ names (at::Tensor) and times have two colons; an address has hex groups around
    # at least two colons and is not a bare decimal time.
    groups = [g for g in candidate.split(":") if g]
    return candidate.count(":") >= 2 and len(groups) >= 2 and not all(g.isdigit() and len(g) <= 2 for g in groups)


def redact_report(report: Mapping[str, Any], keep_hosts: bool = False, extra_hosts: Iterable[str] = (),
                  secrets: Iterable[str] = ()) -> dict[str, Any]:
    """The report as it may leave the machine (`secrets`: what the doctor was given, masked by value). Marks
    itself so a second pass is recognisable."""
    redactor = Redactor.for_this_machine(keep_hosts=keep_hosts, extra_hosts=extra_hosts, secrets=secrets)
    redacted: dict[str, Any] = redactor.tree(dict(report))
    redacted["redaction"] = {"enabled": True, "keep_hosts": keep_hosts}
    return redacted
