"""Reading a Harbor task's ``environment/Dockerfile`` as an environment and a workspace.

Only what a content-hashed environment can reproduce is accepted: one ``FROM`` of a ``python``
image (its ``X.Y`` tag picks the interpreter, when this machine has it), ``RUN pip install
PACKAGE...`` (``pip``, ``pip3`` or ``python -m pip``, joined by ``&&``, a requirements file of
the build context with ``-r``), ``COPY``/``ADD`` of files from the build context (the
``environment/`` folder), ``WORKDIR`` and ``ENV``; ``LABEL``, ``EXPOSE``, ``CMD``,
``ENTRYPOINT``, ``USER``, ``HEALTHCHECK``, ``STOPSIGNAL`` and ``MAINTAINER`` change nothing a
task sees and are passed over. Everything else (``apt-get`` or any other ``RUN``, another base
image, a second ``FROM``, ``COPY --from``, ``ADD`` of a URL or an archive, ``ARG``, variables in
values) is refused, one message per line that cannot be read, so a user fixes them all at once.

The files copied must land in the final ``WORKDIR``: that folder becomes the task's workspace.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from veriloop.core import UserError
from veriloop.sandbox import check_variables

IGNORED = frozenset({"LABEL", "EXPOSE", "CMD", "ENTRYPOINT", "USER", "HEALTHCHECK", "STOPSIGNAL", "MAINTAINER"})
_PYTHON_IMAGES = ("python", "library/python", "docker.io/library/python", "index.docker.io/library/python")
_PIP_FLAGS = frozenset(
    {"--no-cache-dir", "--no-cache", "-q", "--quiet", "-U", "--upgrade", "--disable-pip-version-check"}
    | {"--no-warn-script-location", "--break-system-packages", "--prefer-binary", "--no-input", "--user"}
)
_PIP_VALUED_FLAGS = frozenset({"--root-user-action", "--progress-bar"})
_ARCHIVES = (".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
_COPY_FLAGS = ("--chown", "--chmod", "--link")


@dataclass(frozen=True)
class Instruction:
    """One instruction: its first line, keyword (upper case) and arguments (continuations joined)."""

    line: int
    keyword: str
    arguments: str


@dataclass
class Image:
    """What the Dockerfile builds, as far as a task needs it."""

    python: str | None = None  # the base image's X.Y tag, if it has one
    packages: list[str] = field(default_factory=list)
    workdir: str = "/"
    variables: dict[str, str] = field(default_factory=dict)
    files: dict[str, tuple[bytes, int]] = field(default_factory=dict)  # absolute path -> (content, COPY line)
    folders: set[str] = field(default_factory=lambda: {"/"})

    def workspace(self) -> tuple[dict[str, bytes], list[tuple[int, str]]]:
        """The copied files under the final WORKDIR, relative to it; and (line, problem) for the others."""
        inside, outside = {}, []
        for path, (content, line) in sorted(self.files.items()):
            if path.startswith(self.workdir.rstrip("/") + "/") and self.workdir != "/":
                inside[path[len(self.workdir.rstrip("/")) + 1 :]] = content
            else:
                outside.append(
                    (line, f"{path} lies outside WORKDIR {self.workdir}, the only folder a task's workspace holds")
                )
        return inside, outside


def instructions(text: str) -> list[Instruction]:
    """The instructions of a Dockerfile: comments and blank lines dropped, ``\\`` continuations joined."""
    found: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # a comment inside a continued instruction
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending.append(stripped[:-1])
            continue
        pending.append(stripped)
        keyword, _, arguments = " ".join(pending).partition(" ")
        found.append(Instruction(start, keyword.upper(), arguments.strip()))
        pending = []
    if pending:
        keyword, _, arguments = " ".join(pending).partition(" ")
        found.append(Instruction(start, keyword.upper(), arguments.strip()))
    return found


def read_image(dockerfile: Path) -> tuple[Image, list[str]]:
    """The image ``dockerfile`` builds from its folder (the build context), and one
    ``FILE: line N: ...`` message per instruction that cannot be turned into a task."""
    context = dockerfile.parent
    image, problems = Image(), []
    steps = instructions(dockerfile.read_text(encoding="utf-8"))
    try:
        ignored = _dockerignore(context)
    except UserError as exc:
        return image, [str(exc)]
    for step in steps:
        try:
            _apply(image, step, context, ignored, first=step is steps[0])
        except UserError as exc:
            problems.append(f"{dockerfile}: line {step.line}: {step.keyword}: {exc}")
    if not steps:
        problems.append(f"{dockerfile}: line 1: holds no instruction; it needs FROM python:X.Y")
    elif steps[0].keyword != "FROM":
        problems.append(f"{dockerfile}: line {steps[0].line}: the first instruction must be FROM python:X.Y")
    if not problems:
        problems += [f"{dockerfile}: line {line}: COPY: {why}" for line, why in image.workspace()[1]]
    return image, problems


def _apply(image: Image, step: Instruction, context: Path, ignored: list[str], first: bool) -> None:
    """Apply one instruction to ``image``; UserError saying why it cannot be."""
    if step.keyword in IGNORED:
        return
    if "<<" in step.arguments and step.keyword in ("RUN", "COPY", "ADD"):
        raise UserError("here-documents are not supported")
    handlers = {"FROM": _from, "RUN": _run, "COPY": _copy, "ADD": _add, "WORKDIR": _workdir, "ENV": _env}
    if step.keyword not in handlers:
        raise UserError("not supported: an environment holds pip packages, files, a WORKDIR and ENV variables only")
    if step.keyword == "FROM" and not first:
        raise UserError("a second FROM (a multi-stage build) is not supported")
    handlers[step.keyword](image, step, context, ignored)


def _from(image: Image, step: Instruction, context: Path, ignored: list[str]) -> None:
    arguments = step.arguments
    words = [w for w in arguments.split() if not w.startswith("--platform=")]
    if not words or (len(words) not in (1, 3)) or (len(words) == 3 and words[1].upper() != "AS"):
        raise UserError(f"cannot read {arguments!r}; write FROM python:X.Y")
    reference = words[0].split("@", 1)[0]
    name, _, tag = reference.partition(":") if reference.count(":") <= 1 else reference.rpartition(":")
    if name not in _PYTHON_IMAGES:
        raise UserError(f"base image {words[0]!r} is not supported: only python images (FROM python:X.Y) are")
    version = re.match(r"(\d+)\.(\d+)", tag)
    image.python = f"{version.group(1)}.{version.group(2)}" if version else None


def _words(arguments: str) -> list[str]:
    """A shell-form command's words, with operators (``&&``, ``|``, ``;``, ``>``) as words of their own."""
    if arguments.startswith("["):
        try:
            words = json.loads(arguments)
        except ValueError:
            raise UserError(f"not a JSON list: {arguments!r}") from None
        if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
            raise UserError(f"not a JSON list of strings: {arguments!r}")
        return words
    lexer = shlex.shlex(arguments, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        return list(lexer)
    except ValueError as exc:
        raise UserError(f"cannot read {arguments!r}: {exc}") from None


def _run(image: Image, step: Instruction, context: Path, ignored: list[str]) -> None:
    arguments = step.arguments
    commands: list[list[str]] = [[]]
    for word in _words(arguments):
        if word == "&&":
            commands.append([])
        elif word and set(word) <= set("&|;<>()"):
            raise UserError(f"only pip install commands joined by && are supported, not {word!r}")
        else:
            commands[-1].append(word)
    for command in commands:
        image.packages += _pip_install(command, context)


def _pip_install(command: list[str], context: Path) -> list[str]:
    """The requirement specifiers of one ``pip install`` command; UserError for any other command."""
    shown = " ".join(command) or "an empty command"
    if command[:2] in (["pip", "install"], ["pip3", "install"]):
        rest = command[2:]
    elif (
        len(command) >= 4
        and re.fullmatch(r"python(3(\.\d+)?)?", command[0])
        and command[1:4] == ["-m", "pip", "install"]
    ):
        rest = command[4:]
    else:
        raise UserError(
            f"`{shown}`: only pip install can be turned into an environment (apt-get, curl and the like cannot)"
        )
    packages, words = [], iter(rest)
    for word in words:
        if "$" in word or "`" in word:
            raise UserError(f"`{shown}`: variables are not expanded; write the values out")
        if word in ("-r", "--requirement"):
            packages += _requirements(context, next(words, ""))
        elif word.startswith("--requirement="):
            packages += _requirements(context, word.partition("=")[2])
        elif word in _PIP_FLAGS or word.partition("=")[0] in _PIP_VALUED_FLAGS:
            if word in _PIP_VALUED_FLAGS:
                next(words, None)
        elif word.startswith("-"):
            raise UserError(f"`{shown}`: pip option {word} is not supported")
        elif "/" in word or word.startswith("."):
            raise UserError(f"`{shown}`: {word!r} is a path or URL; only packages of the registry are supported")
        else:
            packages.append(word)
    if not packages:
        raise UserError(f"`{shown}`: installs nothing")
    return packages


def _requirements(context: Path, name: str) -> list[str]:
    path = _context_path(context, name)
    if not path.is_file():
        raise UserError(f"requirements file {name!r} is not a file of the environment folder")
    packages = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("-") or "/" in line or "$" in line:
            raise UserError(f"{name}: {line!r} is not supported; a requirements file may hold package specifiers only")
        if line:
            packages.append(line)
    return packages


def _workdir(image: Image, step: Instruction, context: Path, ignored: list[str]) -> None:
    arguments = step.arguments
    words = _words(arguments)
    if len(words) != 1 or "$" in words[0]:
        raise UserError(f"cannot read {arguments!r}; write WORKDIR /path")
    image.workdir = _absolute(words[0], image.workdir)
    image.folders.update({image.workdir, *(str(p) for p in PurePosixPath(image.workdir).parents)})


def _env(image: Image, step: Instruction, context: Path, ignored: list[str]) -> None:
    arguments = step.arguments
    try:
        words = shlex.split(arguments)
    except ValueError as exc:
        raise UserError(f"cannot read {arguments!r}: {exc}") from None
    if words and "=" not in words[0]:
        pairs = {words[0]: " ".join(words[1:])}  # the older form: ENV NAME value with spaces
    elif all("=" in word for word in words):
        pairs = dict(word.split("=", 1) for word in words)
    else:
        raise UserError(f"cannot read {arguments!r}; write ENV NAME=value ...")
    if any("$" in value for value in pairs.values()):
        raise UserError("variables in values are not expanded; write the value out")
    image.variables.update(check_variables(pairs))


def _add(image: Image, step: Instruction, context: Path, ignored: list[str]) -> None:
    arguments = step.arguments
    sources = [w for w in _words(arguments)[:-1] if not w.startswith("--")]
    if remote := [s for s in sources if re.match(r"[a-z][a-z0-9+.-]*://|git@", s)]:
        raise UserError(f"{remote[0]} is fetched from the network, which an environment cannot do")
    if archives := [s for s in sources if s.endswith(_ARCHIVES)]:
        raise UserError(f"ADD unpacks {archives[0]}; unpack it in the environment folder and COPY it instead")
    _copy(image, step, context, ignored)


def _copy(image: Image, step: Instruction, context: Path, ignored: list[str]) -> None:
    arguments = step.arguments
    words = _words(arguments)
    for word in [w for w in words if w.startswith("--")]:
        if word.startswith("--from"):
            raise UserError("COPY --from (from another stage or image) is not supported")
        if not word.startswith(_COPY_FLAGS):
            raise UserError(f"option {word} is not supported")
    words = [w for w in words if not w.startswith("--")]
    if len(words) < 2:
        raise UserError(f"cannot read {arguments!r}; write COPY SOURCE... DESTINATION")
    *sources, destination = words
    if any("$" in word for word in words):
        raise UserError("variables are not expanded; write the paths out")
    target = _absolute(destination, image.workdir)
    into_folder = destination.endswith("/") or destination in (".", "./") or len(sources) > 1 or target in image.folders
    for source in sources:
        for path, relative in _matches(context, source, ignored):
            if path.is_dir():
                into_folder = True
            for file, inner in _files(path, relative, ignored, context):
                if path.is_dir():
                    place = PurePosixPath(target) / inner
                else:
                    place = PurePosixPath(target) / file.name if into_folder else PurePosixPath(target)
                image.files[str(place)] = (file.read_bytes(), step.line)
                image.folders.update(str(p) for p in place.parents)


def _matches(context: Path, pattern: str, ignored: list[str]) -> list[tuple[Path, str]]:
    """``(path, path relative to the context)`` of each context entry ``pattern`` names."""
    _context_path(context, pattern)
    relative = str(PurePosixPath(pattern.lstrip("/"))) if pattern not in (".", "./", "/") else "."
    if relative == ".":
        return [(context, "")]
    found = sorted(context.glob(relative)) if any(c in relative for c in "*?[") else [context / relative]
    found = [p for p in found if p.exists() and not _ignored(str(p.relative_to(context)), ignored)]
    if not found:
        raise UserError(f"{pattern!r} is not in the environment folder")
    return [(p, str(p.relative_to(context))) for p in found]


def _files(path: Path, relative: str, ignored: list[str], context: Path) -> list[tuple[Path, str]]:
    """The regular files at or under ``path``, each with its path below ``path``."""
    if path.is_symlink() or not (path.is_file() or path.is_dir()):
        raise UserError(f"{relative} is a link or a special file; the environment folder may hold files only")
    if path.is_file():
        return [(path, path.name)]
    files = []
    for inner in sorted(path.rglob("*")):
        name = str(inner.relative_to(context))
        if _ignored(name, ignored) or inner.is_dir() and not inner.is_symlink():
            continue
        if inner.is_symlink() or not inner.is_file():
            raise UserError(f"{name} is a link or a special file; the environment folder may hold files only")
        if path == context and name in ("Dockerfile", ".dockerignore"):
            continue  # the build's own files, not the task's
        files.append((inner, str(inner.relative_to(path))))
    return files


def _context_path(context: Path, name: str) -> Path:
    pure = PurePosixPath(name.lstrip("/") or ".")
    if ".." in pure.parts:
        raise UserError(f"{name!r} lies outside the environment folder, which is all a build can copy from")
    return context / pure


def _absolute(path: str, workdir: str) -> str:
    joined = PurePosixPath(workdir) / path if not path.startswith("/") else PurePosixPath(path)
    parts: list[str] = []
    for part in joined.parts[1:]:
        if part == "..":
            parts = parts[:-1]
        elif part != ".":
            parts.append(part)
    return "/" + "/".join(parts)


def _dockerignore(context: Path) -> list[str]:
    """The patterns of the context's ``.dockerignore`` (exceptions with ``!`` are not supported)."""
    path = context / ".dockerignore"
    if not path.is_file():
        return []
    patterns = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        pattern = line.strip().strip("/")
        if pattern.startswith("!"):
            raise UserError(f"{path}: line {number}: exceptions ({pattern}) are not supported")
        if pattern and not pattern.startswith("#"):
            patterns.append(pattern)
    return patterns


def _ignored(relative: str, patterns: list[str]) -> bool:
    parts = PurePosixPath(relative).parts
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(fnmatch.fnmatch(prefix, pattern) for pattern in patterns for prefix in prefixes)
