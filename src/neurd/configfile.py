"""Reading a config file without trusting it: ``neurd check-config``'s reader.

Snakemake reads a ``--configfile`` as JSON, else as YAML through ``yte``
(``snakemake/common/configfile.py``, ``_load_configfile``).  That reader
takes duplicate keys silently (the last wins), reads a file of any size,
expands YAML aliases without bound and, when the file's top-level mapping
says ``__use_yte__: true``, evaluates the file's YTE expressions as Python.
:func:`read_config_file` reads the same files into the same dict for every
plain config, and refuses the rest with a one-line
:class:`~neurd.config.ConfigError` naming the file (and the key and line
where there is one):

* a file over :data:`MAX_CONFIG_BYTES`, from ``os.stat`` before a byte is read
  (and, for what ``stat`` cannot size, a pipe say, after reading one byte more
  than the cap); a pipe that gives no end of file within :data:`PIPE_SECONDS`
  (a named pipe nobody writes to), and what is no file (a folder, a socket);
* a control character other than tab and line ends (a NUL, an escape);
* JSON objects and YAML mappings with a duplicate key, at any depth (YAML
  keys are compared as the values they load to, so ``1`` and ``1.0`` clash,
  as they would in the dict).  YAML merge keys (``<<: *base``) are allowed:
  a key a mapping writes itself overrides a merged one, as YAML says, and is
  no duplicate; a mapping writing ``<<`` twice is (write ``<<: [*a, *b]``);
* a YAML file that would take more than :data:`MAX_CONFIG_NODES` nodes once
  its aliases are expanded (a "billion laughs" file), or whose alias refers
  to a node holding it (a recursive structure): counted on the composed node
  graph, each distinct node once, before anything is constructed;
* any YAML tag outside plain data (``!!python/...``, local ``!tags``): the
  file is read with a :class:`yaml.SafeLoader` subclass, never ``yte``;
* ``__use_yte__`` set true at the top level: see :data:`YTE_REFUSAL`.
  Nothing in a config file is ever evaluated here.  A false
  ``__use_yte__`` is dropped, as ``yte`` drops it, and the file read as is.

Malformed JSON falls through to YAML, as in Snakemake; malformed YAML is
reported with its line, column and problem (PyYAML keeps the position; yte's
errors lose it).  A JSON file is never templated by Snakemake, so
``__use_yte__`` there is only an unknown top-level key, left to the schema
check.  JSON duplicates are found by an object parser of its own rather than
an ``object_pairs_hook``, which sees a key but not its line; it runs on the
pure-Python scanner (some 0.2 s for 1 MiB).  YAML is composed by PyYAML's
pure-Python parser (a few seconds for 1 MiB at the cap; milliseconds for a
real config).
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
import os
import select
import stat
import time

import yaml
import yaml.nodes

from neurd.config import ConfigError

MAX_CONFIG_BYTES = 1 << 20
"""The largest config file read (1 MiB); a real config is a few KB."""

MAX_CONFIG_NODES = 100_000
"""The most YAML nodes (scalars, lists, mappings) a config may hold once its
aliases are expanded; a real config has a few hundred."""

YTE_REFUSAL = (
    "sets __use_yte__: neurd check-config never evaluates a config file's content, "
    "and Snakemake itself would evaluate this file's YTE expressions as Python when "
    "it loads the file (yte.process_yaml, from snakemake/common/configfile.py), before "
    "the Snakefile runs; write plain values instead and drop __use_yte__")
"""The end of the message for a file with ``__use_yte__`` true at the top level."""

_MERGE = "tag:yaml.org,2002:merge"
_VALUE = "tag:yaml.org,2002:value"
_STR = "tag:yaml.org,2002:str"


def read_config_file(path: str | os.PathLike) -> dict:
    """The config in the file at ``path`` (JSON, else YAML), checked; nothing evaluated.

    The same dict as ``yaml.safe_load`` (or ``json.load``) gives for a plain
    config; every refusal is a one-line :class:`ConfigError` naming ``path``.
    """
    try:
        info = os.stat(path)
        if stat.S_ISREG(info.st_mode):
            if info.st_size > MAX_CONFIG_BYTES:
                raise ConfigError(_too_big(path, info.st_size))
            with open(path, "rb") as handle:
                data = handle.read(MAX_CONFIG_BYTES + 1)
        elif stat.S_ISFIFO(info.st_mode) or stat.S_ISCHR(info.st_mode):
            data = _read_pipe(path)  # a pipe's size is only known by reading it
        else:
            raise ConfigError(f"config file {path} is not a file (a folder, socket or device); "
                              "not read")
    except OSError as error:
        raise ConfigError(f"config file {path}: cannot read it: {error.strerror or error}") \
            from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(_too_big(path, None))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data[:error.start].count(b"\n") + 1
        raise ConfigError(f"config file {path}: not UTF-8 text (byte {error.start}, "
                          f"line {line})") from None
    return parse_config(text, path)


PIPE_SECONDS = 10.0
"""How long a config read from a pipe may take to arrive (a named pipe nobody writes to would
otherwise hang the reader)."""


def _read_pipe(path) -> bytes:
    """A pipe's bytes (at most one more than the cap), without waiting for ever: opened
    without blocking, read until its writer closes it or :data:`PIPE_SECONDS` pass."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    chunks, size, deadline = [], 0, time.monotonic() + PIPE_SECONDS
    try:
        while size <= MAX_CONFIG_BYTES:
            ready, _, _ = select.select([fd], [], [], max(deadline - time.monotonic(), 0))
            if not ready:
                raise ConfigError(f"config file {path} is a pipe that gave no end of file within "
                                  f"{PIPE_SECONDS:g} s (nothing writing to it?); not read")
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


def _control_character(text: str, path) -> None:
    """Refuse a control character (other than tab and line ends): neither JSON nor YAML
    config text holds one, and a terminal would act on it when the file is shown."""
    for position, character in enumerate(text):
        if (ord(character) < 0x20 and character not in "\t\n\r") or character == "\x7f":
            line = _line(text, position)
            column = position - text.rfind("\n", 0, position)
            raise ConfigError(f"config file {path}: control character U+{ord(character):04X} at "
                              f"line {line}, column {column}; not a text config")


def parse_config(text: str, path: str | os.PathLike = "<string>") -> dict:
    """The config in ``text`` (JSON, else YAML), checked as :func:`read_config_file` does.

    ``path`` only names the file in messages; no size cap applies to ``text``
    here beyond :data:`MAX_CONFIG_NODES`.
    """
    _control_character(text, path)
    try:
        config = _parse_json(text, path)
    except ConfigError:
        raise
    except RecursionError:
        raise ConfigError(f"config file {path}: nested too deep") from None
    except ValueError:  # not JSON: YAML, as Snakemake does
        config = _parse_yaml(text, path)
    if not isinstance(config, dict):
        raise ConfigError(f"config file {path}: expected keys at the top level (a mapping), "
                          f"got {type(config).__name__}")
    return config


def _too_big(path, size) -> str:
    what = f"is {size} bytes, over" if size is not None else "holds more than"
    return (f"config file {path} {what} the {MAX_CONFIG_BYTES}-byte cap on a config file "
            f"(a real config is a few KB); not read")


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


# --- JSON -------------------------------------------------------------------------


def _parse_json(text: str, path) -> object:
    """``json.loads`` with the pure-Python scanner and an object parser that refuses
    a duplicate key, naming it and both its lines (an ``object_pairs_hook`` sees
    the pairs but not where they are)."""
    decoder = json.JSONDecoder()

    def parse_object(s_and_end, strict, scan_once, object_hook, object_pairs_hook,
                     memo=None):
        return _json_object(s_and_end, strict, scan_once, path)

    decoder.parse_object = parse_object
    decoder.scan_once = json.scanner.py_make_scanner(decoder)
    return decoder.decode(text)


def _json_object(s_and_end, strict, scan_once, path):
    """One JSON object from after its ``{``; as ``json.decoder.JSONObject``, keys unique."""
    s, end = s_and_end
    ws = json.decoder.WHITESPACE.match
    error = json.JSONDecodeError
    pairs: dict[str, object] = {}
    where: dict[str, int] = {}
    end = ws(s, end).end()
    if s[end:end + 1] == "}":
        return pairs, end + 1
    while True:
        if s[end:end + 1] != '"':
            raise error("Expecting property name enclosed in double quotes", s, end)
        start = end
        key, end = json.decoder.scanstring(s, end + 1, strict)
        end = ws(s, end).end()
        if s[end:end + 1] != ":":
            raise error("Expecting ':' delimiter", s, end)
        end = ws(s, end + 1).end()
        try:
            value, end = scan_once(s, end)
        except StopIteration as stop:
            raise error("Expecting value", s, stop.value) from None
        if key in pairs:
            raise ConfigError(f"config file {path}: duplicate key {key!r} at line "
                              f"{_line(s, start)} (first at line {_line(s, where[key])})")
        pairs[key], where[key] = value, start
        end = ws(s, end).end()
        delimiter = s[end:end + 1]
        if delimiter == "}":
            return pairs, end + 1
        if delimiter != ",":
            raise error("Expecting ',' delimiter", s, end)
        end = ws(s, end + 1).end()


# --- YAML -------------------------------------------------------------------------


class _SafeLoader(yaml.SafeLoader):
    """PyYAML's safe loader: plain data only.  Its own class, so that nothing
    registered on :class:`yaml.SafeLoader` elsewhere reaches a config."""

    yaml_constructors = dict(yaml.SafeLoader.yaml_constructors)
    yaml_multi_constructors = {}

    def __init__(self, text: str, path):
        super().__init__(text)
        self.config_path = path

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep=deep)
        except ConfigError:
            raise
        except ValueError as error:  # a date 2020-13-01, an int over Python's digit limit
            mark = node.start_mark
            raise ConfigError(f"config file {self.config_path}: the value at line "
                              f"{mark.line + 1}, column {mark.column + 1} cannot be read: "
                              f"{' '.join(str(error).split())}") from None


_TAGS = frozenset(tag for tag in _SafeLoader.yaml_constructors if tag is not None)


def _parse_yaml(text: str, path) -> object:
    try:
        loader = _SafeLoader(text, path)
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {path} is neither JSON nor valid YAML"
                          f"{_yaml_problem(error)}") from None
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        _check_expanded_size(root, path)
        use_yte = _check_yte(loader, root, path)
        _check_nodes(loader, root, path)
        config = loader.construct_document(root)
    except ConfigError:
        raise
    except yaml.YAMLError as error:
        raise ConfigError(f"config file {path} is neither JSON nor valid YAML"
                          f"{_yaml_problem(error)}") from None
    except RecursionError:
        raise ConfigError(f"config file {path}: nested too deep") from None
    finally:
        loader.dispose()
    if use_yte is not None and isinstance(config, dict):
        config.pop("__use_yte__", None)  # false: dropped, as yte drops it
    return config


def _yaml_problem(error) -> str:
    """Where and what YAML found wrong: ``" at line L, column C: problem"``."""
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    what = ", ".join(filter(None, (getattr(error, "context", None),
                                   getattr(error, "problem", None))))
    return f"{where}: {' '.join((what or str(error)).split())}"


def _children(node):
    if isinstance(node, yaml.nodes.MappingNode):
        return [child for pair in node.value for child in pair]
    if isinstance(node, yaml.nodes.SequenceNode):
        return node.value
    return ()


def _check_expanded_size(root, path) -> None:
    """Refuse a node graph over :data:`MAX_CONFIG_NODES` nodes once its aliases are
    expanded, or with a cycle.  Each distinct node is sized once (memoised, no
    recursion), so a billion laughs costs as many steps as it has lines."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()  # begun, not finished: the current node's ancestors
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            open_.discard(key)
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            if size > MAX_CONFIG_NODES:
                raise ConfigError(
                    f"config file {path}: more than {MAX_CONFIG_NODES} values once its "
                    f"aliases are expanded (the mapping or list at line "
                    f"{node.start_mark.line + 1} alone has {size}); a real config has "
                    f"hundreds: write it out without nested aliases")
            sizes[key] = size
            continue
        if key in sizes:
            continue
        if key in open_:
            raise ConfigError(f"config file {path}: the node anchored at line "
                              f"{node.start_mark.line + 1} holds an alias of itself "
                              f"(a recursive structure): not a config")
        open_.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))


def _check_yte(loader, root, path):
    """The top-level ``__use_yte__`` value (None if absent); refused if true, as yte
    would then evaluate the file."""
    if not isinstance(root, yaml.nodes.MappingNode):
        return None
    for key, value in root.value:
        if isinstance(key, yaml.nodes.ScalarNode) and key.tag == _STR \
                and key.value == "__use_yte__":
            if isinstance(value, yaml.nodes.ScalarNode):
                # a tag outside plain data is refused later (_check_nodes)
                flag = loader.construct_object(value) if value.tag in _TAGS else None
            else:
                flag = bool(value.value)  # a list or mapping: true unless empty
            if flag:
                raise ConfigError(f"config file {path}: line {key.start_mark.line + 1} "
                                  f"{YTE_REFUSAL}")
            return flag
    return None


def _key(loader, node):
    """What a mapping key loads to, for comparing keys as the dict will."""
    if node.tag in (_MERGE, _VALUE):
        return (node.tag,)
    if isinstance(node, yaml.nodes.ScalarNode):
        return loader.construct_object(node)
    return (id(node),)  # a list or mapping as a key: left to the constructor (unhashable)


def _check_nodes(loader, root, path) -> None:
    """Every distinct node once: tags plain data only, each mapping's own keys unique."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.tag not in _TAGS and node.tag not in (_MERGE, _VALUE):
            tag = node.tag.replace("tag:yaml.org,2002:", "!!", 1)
            raise ConfigError(f"config file {path}: tag {tag} at line "
                              f"{node.start_mark.line + 1} is not allowed: a config holds "
                              f"plain values (strings, numbers, booleans, lists, mappings)")
        if isinstance(node, yaml.nodes.MappingNode):
            first: dict[object, int] = {}
            for key, _ in node.value:
                if key.tag in _TAGS or key.tag in (_MERGE, _VALUE):
                    loaded = _key(loader, key)
                    line = key.start_mark.line + 1
                    if loaded in first:
                        raise ConfigError(f"config file {path}: duplicate key {key.value!r} "
                                          f"at line {line} (first at line {first[loaded]})")
                    first[loaded] = line
        stack.extend(_children(node))


# --- command-line overrides ----------------------------------------------------------------


def type_overrides(config: dict, overrides) -> list[str]:
    """Type ``snakemake --config`` values nested in a mapping as a config file's are.

    Snakemake parses a top-level ``--config key=value`` as a number or a boolean where it
    can, but reads a nested one (``neural={seeds: 2}``) with YAML's base loader, which keeps
    every scalar a string ("2"), so the schema would refuse a valid override.  Every string
    in ``overrides`` below the top level is read again as a YAML scalar of a config file
    (``yaml.safe_load``: ``2`` an int, ``0.1`` a float, ``true`` a bool) and put in
    ``config`` at its place; strings stay strings.  Returns the dotted keys retyped.
    """
    retyped: list[str] = []

    def retype(value, path):
        if isinstance(value, dict):
            return {k: retype(v, f"{path}.{k}") for k, v in value.items()}
        if isinstance(value, list):
            return [retype(v, f"{path}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, str):
            try:
                typed = yaml.safe_load(value)
            except yaml.YAMLError:
                return value
            if isinstance(typed, (bool, int, float)) or typed is None:
                retyped.append(path)
                return typed
        return value

    for key, value in dict(overrides or {}).items():
        if isinstance(value, (dict, list)) and key in config:
            typed = retype(value, key)
            config[key] = _merged(config[key], typed)
    return retyped


def _merged(base, given):
    """``given`` over ``base`` (mappings merged key by key, as Snakemake merges overrides)."""
    if isinstance(base, dict) and isinstance(given, dict):
        return {**base, **{k: _merged(base.get(k), v) for k, v in given.items()}}
    return given
