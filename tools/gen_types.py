"""Generate ``src/mcp_sansio/types.py`` from the official MCP JSON Schemas.

Usage (from anywhere)::

    python tools/gen_types.py [--spec-dir DIR] [--output FILE]

``--spec-dir`` holds one folder per revision (``<DIR>/<revision>/schema.json``); it defaults to
``shared/spec/schema`` beside the repository. Adding a revision is one line in ``REVISIONS``
and one run of this script.

Theory of operation
-------------------
1. *Read* each revision on its own. Every definition becomes either a **shape** (an object with
   properties, later an attrs class) or an **alias** (a union, a map, a scalar). Inline objects
   with properties become shapes too, named ``<Parent><Property>`` (``Item`` is appended for
   array items, ``Value`` for map values). ``allOf`` is flattened into one shape. ``_meta``
   and the JSON Schema documents in ``FREE_FORM_PROPERTIES`` are plain ``dict[str, Any]``.
2. *Merge* the revisions by name. A class holds the union of the fields of every revision; a
   field is required only if every revision that has the class requires it. Field types are
   merged by the rules in :func:`Model.merge_types`; anything they do not cover stops the
   generator with a message, so a new revision cannot slip through half-understood.
3. *Emit* Python: classes first (annotations are lazy), then the aliases that name classes,
   and finally ``ruff format`` over the result.

Serialization is not generated: ``mcp_sansio/_serde.py`` reads the attrs fields (and the
``wire_name`` metadata emitted here for names that camelCase cannot produce).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import keyword
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SPEC_DIR = REPO.parent / "shared" / "spec" / "schema"
DEFAULT_OUTPUT = REPO / "src" / "mcp_sansio" / "types.py"

#: The revisions merged into ``types.py``, oldest first. The newest one's descriptions win.
REVISIONS = ("2025-11-25", "2026-07-28")

#: Objects that keep members the schema does not name (an ``extra`` field). Besides these, a
#: shape is open when its schema allows ``additionalProperties``, and inline shapes nested in
#: an open shape are open. Capabilities are how the protocol grows (``tasks`` and
#: ``extensions`` arrived that way) and ``_meta`` objects carry vendor keys by design.
OPEN_SHAPES = frozenset(
    {
        "ClientCapabilities",
        "ServerCapabilities",
        "RequestMetaObject",
        "ResultMetaObject",
        "NotificationMetaObject",
        "SubscriptionsListenResultMetaObject",
    }
)

#: Properties kept as plain ``dict[str, Any]`` although the schema sketches their insides:
#: they hold JSON Schema documents, which a typed class could not model faithfully.
FREE_FORM_PROPERTIES = frozenset({("Tool", "inputSchema"), ("Tool", "outputSchema")})

#: Prefix stripped from namespaced ``_meta`` keys to make Python names.
META_PREFIX = "io.modelcontextprotocol/"

#: Fields listed first in a class, in this order; the rest are alphabetical, ``_meta`` last.
LEADING_FIELDS = ("jsonrpc", "id", "method", "type")

#: Used when neither revision describes a property.
FALLBACK_DOCS = {
    "jsonrpc": "The JSON-RPC protocol version.",
    "id": "The JSON-RPC request id.",
    "method": "The JSON-RPC method name.",
    "params": "The parameters of the request or notification.",
    "result": "The result of the request.",
    "error": "The JSON-RPC error object.",
    "type": "The kind of this object.",
    "_meta": "Reserved by MCP for protocol-level metadata; see the ``_meta`` rules of the spec.",
    "requestState": "Opaque state from an earlier input-required result, echoed back.",
    "inputResponses": "The answers to the input requests of an earlier input-required result.",
}

EXTRA_DOC = "Members the schema does not name, kept so that they survive a round trip."


# --- Type expressions -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class T:
    """A type expression: ``prim`` (name), ``lit`` (values), ``list``/``map`` (one arg),
    ``ref`` (name of a class or alias) or ``union`` (args)."""

    kind: str
    name: str = ""
    values: tuple[Any, ...] = ()
    args: tuple[T, ...] = ()


ANY = T("prim", "Any")
NONE = T("prim", "None")  # JSON null, as in ``"type": ["integer", "null"]``
MAP_ANY = T("map", args=(ANY,))
PRIMITIVES = {
    "string": "str",
    "integer": "int",
    "number": "float",
    "boolean": "bool",
    "null": "None",
}


def prim(name: str) -> T:
    return T("prim", name)


def ref(name: str) -> T:
    return T("ref", name)


def union(members: Iterable[T]) -> T:
    flat: list[T] = []
    for m in members:
        for x in m.args if m.kind == "union" else (m,):
            if x not in flat:
                flat.append(x)
    return flat[0] if len(flat) == 1 else T("union", args=tuple(flat))


def refs_in(t: T) -> Iterator[str]:
    if t.kind == "ref":
        yield t.name
    for a in t.args:
        yield from refs_in(a)


# --- Reading one revision -------------------------------------------------------------------


@dataclasses.dataclass
class Prop:
    type: T
    required: bool
    doc: str


@dataclasses.dataclass
class Shape:
    """One revision's view of an object type."""

    revision: str
    doc: str
    props: dict[str, Prop]
    open: bool
    parent: str | None = None  # the enclosing shape, for inline shapes

    def signature(self) -> Any:
        """What the shape accepts, ignoring documentation."""
        return (sorted((k, p.type, p.required) for k, p in self.props.items()), self.open)


class Revision:
    """The shapes and aliases of one schema revision."""

    def __init__(self, revision: str, schema: dict[str, Any], known: set[str]) -> None:
        self.revision = revision
        self.known = known  # every definition name of every revision, for links in docs
        self.defs: dict[str, Any] = schema["$defs"]
        self.shapes: dict[str, Shape] = {}
        self.aliases: dict[str, T] = {}
        self.docs: dict[str, str] = {}
        for name, raw in self.defs.items():
            self.docs[name] = self.describe(raw)
            if "$ref" in raw and raw.get("description") == self.resolve(raw).get("description"):
                self.docs[name] = ""  # TypeScript copied the target's text onto the alias
            definition = self.flatten(raw)
            if definition.get("properties"):
                self.add_shape(name, definition, parent=None)
            else:
                self.aliases[name] = self.read_type(definition, name, name)

    def flatten(self, schema: dict[str, Any]) -> dict[str, Any]:
        """Fold ``allOf`` into one object schema (later parts refine earlier ones)."""
        if "allOf" not in schema:
            return schema
        out: dict[str, Any] = {"type": "object", "properties": {}, "required": []}
        for member in schema["allOf"]:
            part = self.flatten(self.resolve(member))
            for key, sub in part.get("properties", {}).items():
                out["properties"][key] = {**out["properties"].get(key, {}), **sub}
            out["required"] += [r for r in part.get("required", []) if r not in out["required"]]
            if "additionalProperties" in part:
                out["additionalProperties"] = part["additionalProperties"]
        if "description" in schema:
            out["description"] = schema["description"]
        return out

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        if "$ref" in schema:
            return self.resolve(self.defs[ref_name(schema["$ref"])])
        return schema

    def add_shape(self, name: str, schema: dict[str, Any], parent: str | None) -> None:
        if name in self.shapes or (parent is not None and name in self.defs):
            raise SystemExit(f"{self.revision}: inline shape name {name!r} is already taken")
        extra = schema.get("additionalProperties", False)
        is_open = extra is not False or name in OPEN_SHAPES
        if parent is not None and self.shapes[parent].open:
            is_open = True
        shape = Shape(self.revision, self.describe(schema), {}, is_open)
        shape.parent = parent
        self.shapes[name] = shape
        required = set(schema.get("required", ()))
        for wire, sub in schema["properties"].items():
            if wire == "_meta" or (name, wire) in FREE_FORM_PROPERTIES:
                t = MAP_ANY
            else:
                t = self.read_type(sub, inline_name(name, wire), name)
            shape.props[wire] = Prop(t, wire in required, self.describe(sub))

    def read_type(self, schema: dict[str, Any], hint: str, owner: str) -> T:
        """The type of ``schema``; inline objects become shapes named ``hint``."""
        schema = self.flatten(schema)
        if "$ref" in schema:
            return ref(ref_name(schema["$ref"]))
        for key in ("anyOf", "oneOf"):
            if key in schema:
                return union(self.read_type(s, hint, owner) for s in schema[key])
        if "const" in schema:
            return T("lit", values=(schema["const"],))
        if "enum" in schema:
            return T("lit", values=tuple(schema["enum"]))
        kind = schema.get("type")
        if isinstance(kind, list):
            return union(prim(PRIMITIVES[k]) for k in kind)
        if kind == "array":
            return T("list", args=(self.read_type(schema.get("items", {}), hint + "Item", owner),))
        if kind == "object" or "properties" in schema:
            if schema.get("properties"):
                self.add_shape(hint, schema, parent=owner if owner != hint else None)
                return ref(hint)
            values = schema.get("additionalProperties", True)
            if isinstance(values, dict) and values:
                return T("map", args=(self.read_type(values, hint + "Value", owner),))
            return MAP_ANY
        if kind is None:
            return ANY
        return prim(PRIMITIVES[kind])

    def describe(self, schema: dict[str, Any]) -> str:
        return first_paragraph(schema.get("description", ""), self.known)


def ref_name(pointer: str) -> str:
    return pointer.rsplit("/", 1)[-1]


# --- Merging the revisions ------------------------------------------------------------------


@dataclasses.dataclass
class Field:
    wire: str
    type: T
    required: bool
    doc: str
    notes: list[str] = dataclasses.field(default_factory=list)  # which revisions have it


@dataclasses.dataclass
class ClassDef:
    name: str
    doc: str
    fields: list[Field]
    open: bool
    notes: list[str] = dataclasses.field(default_factory=list)


class Model:
    """All revisions merged: classes and aliases by name."""

    def __init__(self, revisions: list[Revision]) -> None:
        self.revisions = revisions
        self.names = [r.revision for r in revisions]
        self.shapes: dict[str, list[Shape]] = {}
        self.alias_parts: dict[str, list[T]] = {}
        self.redirects: dict[str, str] = {}  # absorbed inline shape -> the named class
        self.docs: dict[str, str] = {}
        self.collapse_one_member_unions()
        for rev in revisions:
            for name, doc in rev.docs.items():
                self.docs[name] = doc or self.docs.get(name, "")
        for rev in revisions:
            for name, shape in rev.shapes.items():
                self.shapes.setdefault(name, []).append(shape)
            for name, t in rev.aliases.items():
                self.alias_parts.setdefault(name, []).append(t)
        self.absorb_inline_shapes()
        self.classes = {name: self.merge_class(name) for name in sorted(self.shapes)}
        self.aliases = self.merge_aliases()
        self.borrow_class_docs()

    def collapse_one_member_unions(self) -> None:
        """A name that is a union in one revision and an object in another is a union whose
        only member TypeScript inlined (2026-07-28 ``ClientNotification``): point it at the
        structurally identical definition of its own revision."""
        union_names = {n for r in self.revisions for n, t in r.aliases.items() if t.kind == "union"}
        for rev in self.revisions:
            for name in sorted(union_names & rev.shapes.keys()):
                sig = rev.shapes[name].signature()
                twins = [
                    n
                    for n, s in rev.shapes.items()
                    if n != name and s.parent is None and s.signature() == sig
                ]
                if len(twins) != 1:
                    raise SystemExit(f"{rev.revision}: cannot tell what {name} stands for")
                del rev.shapes[name]
                rev.aliases[name] = ref(twins[0])
                rev.docs[name] = ""  # the member's description, not the union's

    def absorb_inline_shapes(self) -> None:
        """Line up a property whose revisions spell it differently:

        * one revision names a class, another spells the object inline
          (``ListRootsRequest.params``): the named class takes the inline shape in;
        * one revision has a class, another a free-form object (``ClientCapabilities.roots``):
          the class takes in an empty open shape, so all its fields become optional and
          unknown members are kept.
        """
        for shapes in list(self.shapes.values()):
            for wire in sorted({w for s in shapes for w in s.props}):
                uses = [(s.revision, s.props[wire].type) for s in shapes if wire in s.props]
                classes = [t.name for _, t in uses if t.kind == "ref" and t.name in self.shapes]
                named = [c for c in classes if not self.is_inline(c)]
                for child in classes:
                    if named and child != named[0] and self.is_inline(child):
                        self.shapes[named[0]].extend(self.shapes.pop(child))
                        self.redirects[child] = named[0]
                target = self.redirects.get(classes[0], classes[0]) if classes else None
                for revision, t in uses:
                    if target is not None and t.kind != "ref" and self.is_free_form(t):
                        self.shapes[target].append(Shape(revision, "", {}, open=True))

    def is_inline(self, name: str) -> bool:
        return all(s.parent is not None for s in self.shapes.get(name, ()))

    def merge_class(self, name: str) -> ClassDef:
        shapes = self.shapes[name]
        wires = sorted({w for s in shapes for w in s.props}, key=field_order)
        fields = []
        for wire in wires:
            present = [s for s in shapes if wire in s.props]
            props = [s.props[wire] for s in present]
            t = props[0].type
            for p in props[1:]:
                t = self.merge_types(t, p.type, f"{name}.{wire}")
            required = len(present) == len(shapes) and all(p.required for p in props)
            doc = next((p.doc for p in reversed(props) if p.doc), "")
            f = Field(wire, self.redirect(t), required, doc)
            if not f.doc and f.type.kind == "ref":
                f.doc = self.docs.get(f.type.name, "")
            if not f.doc and name.endswith("Schema"):
                f.doc = f"The JSON Schema ``{wire}`` keyword."
            f.doc = f.doc or FALLBACK_DOCS.get(wire, f"The ``{wire}`` member.")
            if f.type.kind == "lit" and len(f.type.values) == 1:
                f.notes.append(f"Always ``{json.dumps(f.type.values[0])}``.")
            class_revisions = {s.revision for s in shapes}
            field_revisions = {s.revision for s in present}
            if field_revisions != class_revisions:
                f.notes.append(f"Only in revision {', '.join(sorted(field_revisions))}.")
            elif not required and any(p.required for p in props):
                needs = {s.revision for s, p in zip(present, props, strict=True) if p.required}
                f.notes.append(f"Required in revision {', '.join(sorted(needs))}.")
            fields.append(f)
        doc = self.docs.get(name) or next((s.doc for s in reversed(shapes) if s.doc), "")
        cls = ClassDef(name, doc, fields, any(s.open for s in shapes))
        revisions = sorted({s.revision for s in shapes})
        if len(revisions) < len(self.names):
            cls.notes.append(f"Only in revision {', '.join(revisions)}.")
        return cls

    def borrow_class_docs(self) -> None:
        """An undocumented inline class takes the description of the member holding it."""
        for cls in self.classes.values():
            if not cls.doc:
                docs = [
                    f.doc
                    for other in self.classes.values()
                    for f in other.fields
                    if cls.name in refs_in(f.type)
                ]
                cls.doc = docs[0] if docs else f"The ``{cls.name}`` object."

    def redirect(self, t: T) -> T:
        if t.kind == "ref":
            return ref(self.redirects.get(t.name, t.name))
        return dataclasses.replace(t, args=tuple(self.redirect(a) for a in t.args))

    def merge_types(self, a: T, b: T, where: str) -> T:
        """One type that accepts the values of both revisions."""
        a, b = self.redirect(a), self.redirect(b)
        if a == b:
            return a
        if ANY in (a, b):
            return ANY
        if a.kind == b.kind == "lit":
            return T("lit", values=a.values + tuple(v for v in b.values if v not in a.values))
        if a.kind == b.kind and a.kind in ("list", "map"):
            return T(a.kind, args=(self.merge_types(a.args[0], b.args[0], where),))
        if self.is_free_form(a) and self.is_free_form(b):
            return b if b.kind == "ref" else a  # prefer a named alias such as ``JSONObject``
        for one, other in ((a, b), (b, a)):
            if one.kind == "ref" and one.name in self.shapes and self.is_free_form(other):
                return one  # the class took in an open shape; see absorb_inline_shapes
        if a.kind == "union" or b.kind == "union":
            return union([b, a])  # the newer revision's order first: it breaks dispatch ties
        raise SystemExit(f"{where}: no rule merges {a} and {b}; extend Model.merge_types")

    def is_free_form(self, t: T) -> bool:
        """A map, or an alias of one (``JSONObject``, ``MetaObject``)."""
        while t.kind == "ref" and t.name in self.alias_parts:
            t = self.alias_parts[t.name][-1]
        return t.kind == "map"

    def merge_aliases(self) -> dict[str, T]:
        merged: dict[str, T] = {}
        for name, parts in self.alias_parts.items():
            t = parts[0]
            for p in parts[1:]:
                t = self.merge_types(t, p, name)
            merged[name] = self.redirect(t)
        # Python 3.11 cannot spell a recursive alias: a union alias on a cycle becomes Any.
        for name in sorted(merged):
            if merged[name].kind == "union" and self.reaches(merged, name, name, set()):
                merged[name] = ANY
        cyclic = [name for name in merged if self.reaches(merged, name, name, set())]
        if cyclic:
            raise SystemExit(f"recursive aliases with no union to break the cycle: {cyclic}")
        return merged

    def reaches(self, aliases: dict[str, T], start: str, goal: str, seen: set[str]) -> bool:
        for r in refs_in(aliases[start]):
            if r == goal:
                return True
            if r in aliases and r not in seen:
                seen.add(r)
                if self.reaches(aliases, r, goal, seen):
                    return True
        return False


def field_order(wire: str) -> tuple[int, str]:
    if wire in LEADING_FIELDS:
        return (0, str(LEADING_FIELDS.index(wire)))
    return (2 if wire == "_meta" else 1, wire)


# --- Names and docs -------------------------------------------------------------------------


def pascal(wire: str) -> str:
    core = wire.lstrip("_$")
    return core[:1].upper() + core[1:]


def inline_name(parent: str, wire: str) -> str:
    """``CompleteResult.completion`` -> ``CompleteResultCompletion``; the ``error`` member of
    ``HeaderMismatchError`` -> ``HeaderMismatchErrorObject`` rather than ``...ErrorError``."""
    member = pascal(wire)
    return parent + ("Object" if parent.endswith(member) else member)


def python_name(wire: str) -> str:
    """``inputSchema`` -> ``input_schema``; ``_meta`` -> ``meta``; ``$schema`` -> ``schema``."""
    name = wire.removeprefix(META_PREFIX).lstrip("_$")
    name = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    return name + "_" if keyword.iskeyword(name) or name == "extra" else name


def default_wire_name(name: str) -> str:
    """The rule ``_serde`` applies when a field carries no ``wire_name`` metadata."""
    if name == "meta":
        return "_meta"
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


LINK = re.compile(r"\{@link ([^}]*)\}")
MARKDOWN_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
CODE = re.compile(r"(?<!`)`([^`]+)`(?!`)")


def first_paragraph(text: str, known: set[str]) -> str:
    """The first paragraph of a schema description, on one line, in reST."""
    paragraph = text.strip().split("\n\n", 1)[0]
    paragraph = MARKDOWN_LINK.sub(r"\1", paragraph)
    paragraph = CODE.sub(r"``\1``", paragraph)
    paragraph = LINK.sub(lambda m: render_link(m.group(1), known), paragraph)
    return " ".join(paragraph.split())


def render_link(target: str, known: set[str]) -> str:
    """``{@link CallToolRequesttools/call}`` -> ````tools/call````: TypeScript's link text
    arrives glued to the symbol, so split after the longest leading symbol we know."""
    match = re.match(r"[A-Z][A-Za-z]*(\.[A-Za-z]+)*", target)
    symbol = match.group(0) if match else ""
    while symbol and symbol not in known and "." not in symbol:
        symbol = symbol[:-1]
    text = target[len(symbol) :].strip() or symbol
    return f"``{text.strip('`')}``"


def join_doc(doc: str, sentence: str) -> str:
    return f"{doc} {sentence}" if doc else sentence


# --- Emitting Python ------------------------------------------------------------------------


HEADER = '''\
"""The MCP data model: one frozen attrs class per object type of the schema.

GENERATED by ``tools/gen_types.py`` from the JSON Schemas of revisions {revisions}.
Do not edit by hand; change the generator and run ``python tools/gen_types.py``.

Conventions (serialization itself lives in ``mcp_sansio._serde``):

* A class holds the union of the fields of every revision. A field required by one revision
  but absent from (or optional in) another is optional here; the field's docstring says which
  revision has or requires it. Data of either revision structures and round-trips.
* Python names are snake_case; on the wire they are camelCase (``input_schema`` is
  ``inputSchema``), ``meta`` is ``_meta``, and other names (``$schema``, namespaced ``_meta``
  keys) are given by ``wire_name`` field metadata.
* An absent optional field is ``None`` and is omitted on output; ``null`` is never written
  for it. Constant members (``jsonrpc``, a request's ``method``, a content block's ``type``)
  default to their constant and are always written.
* Free-form objects (``_meta``, ``arguments``, ``structuredContent``, JSON Schema documents
  such as ``Tool.input_schema``) are ``dict[str, Any]``.
* Extensible objects (capabilities and their parts, the ``*MetaObject`` types, and objects
  whose schema allows additional properties, such as ``Result``) keep members the schema does
  not name in ``extra``, which is merged back on output.
* Unions (``ContentBlock``, ``PrimitiveSchemaDefinition``, ...) are plain typing unions;
  ``_serde`` picks the member from constant members such as ``type`` or ``method`` and from
  which required keys are present.
* JSON ``number`` is ``float`` (an ``int`` is accepted and kept as is). The recursive
  ``JSONValue`` is ``Any``.
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias, final

import attrs
'''


class Emitter:
    def __init__(self, model: Model) -> None:
        self.model = model
        self.lines: list[str] = []

    def render(self) -> str:
        model = self.model
        scalar, composite = self.split_aliases()
        self.lines.append(HEADER.format(revisions=" and ".join(model.names)))
        names = sorted([*model.classes, *model.aliases])
        self.lines.append("__all__ = [")
        self.lines += [f'    "{n}",' for n in names]
        self.lines.append("]")
        self.section("Scalar aliases")
        for name in scalar:
            self.emit_alias(name)
        self.section("Object types")
        for cls in model.classes.values():
            self.emit_class(cls)
        self.section("Unions and maps (after the classes they name)")
        for name in composite:
            self.emit_alias(name)
        return "\n".join(self.lines) + "\n"

    def section(self, title: str) -> None:
        self.lines += ["", "", f"# --- {title} " + "-" * (92 - len(title)), ""]

    def split_aliases(self) -> tuple[list[str], list[str]]:
        """Aliases that name no class (emitted first), then the rest; each in dependency order."""
        aliases, classes = self.model.aliases, self.model.classes

        def deps(name: str) -> set[str]:
            return {r for r in refs_in(aliases[name]) if r in aliases}

        def names_class(name: str) -> bool:
            return any(
                r in classes or (r in aliases and names_class(r)) for r in refs_in(aliases[name])
            )

        scalar = topo([n for n in sorted(aliases) if not names_class(n)], deps, [])
        return scalar, topo(sorted(set(aliases) - set(scalar)), deps, scalar)

    def emit_alias(self, name: str) -> None:
        self.lines.append(f"{name}: TypeAlias = {self.spell(self.model.aliases[name])}")
        doc = self.model.docs.get(name, "")
        if self.model.aliases[name] == ANY and name.startswith("JSON"):
            doc = join_doc(doc, "Any JSON value (recursive in the schema).")
        if doc:
            self.lines += docstring(doc, "")
        self.lines.append("")

    def emit_class(self, cls: ClassDef) -> None:
        self.lines += ["", "@final", "@attrs.frozen(kw_only=True)", f"class {cls.name}:"]
        self.lines += docstring(" ".join([cls.doc, *cls.notes]), "    ")
        self.lines.append("")
        seen: set[str] = set()
        for f in cls.fields:
            name = python_name(f.wire)
            if name in seen:
                raise SystemExit(f"{cls.name}: two members map to the Python name {name!r}")
            seen.add(name)
            self.lines.append(f"    {name}: {self.annotation(f)}{self.default(f, name)}")
            self.lines += docstring(" ".join([f.doc, *f.notes]), "    ")
        if cls.open:
            self.lines.append("    extra: dict[str, Any] = attrs.field(factory=dict)")
            self.lines += docstring(EXTRA_DOC, "    ")
        self.lines.append("")

    def annotation(self, f: Field) -> str:
        spelled = self.spell(f.type)
        if f.required or f.type == ANY or NONE in f.type.args:
            return spelled
        return f"{spelled} | None"

    @staticmethod
    def is_const(f: Field) -> bool:
        return f.required and f.type.kind == "lit" and len(f.type.values) == 1

    def default(self, f: Field, name: str) -> str:
        wire = f.wire if default_wire_name(name) != f.wire else None
        if self.is_const(f):
            value = repr_value(f.type.values[0])
        elif f.required:
            value = None
        else:
            value = "None"
        if wire is None:
            return f" = {value}" if value is not None else ""
        args = ([f"default={value}"] if value is not None else []) + [
            f'metadata={{"wire_name": "{wire}"}}'
        ]
        return f" = attrs.field({', '.join(args)})"

    def spell(self, t: T) -> str:
        if t.kind in ("prim", "ref"):
            return t.name
        if t.kind == "lit":
            return f"Literal[{', '.join(repr_value(v) for v in t.values)}]"
        if t.kind == "list":
            return f"list[{self.spell(t.args[0])}]"
        if t.kind == "map":
            return f"dict[str, {self.spell(t.args[0])}]"
        return " | ".join(self.spell(a) for a in t.args)


def topo(names: list[str], deps: Callable[[str], set[str]], before: list[str]) -> list[str]:
    """``names`` ordered so that each comes after its ``deps`` (``before`` is already out)."""
    done: list[str] = []
    while len(done) < len(names):
        ready = [n for n in names if n not in done and deps(n) <= {*before, *done}]
        if not ready:
            raise SystemExit(f"aliases depend on each other in a cycle: {set(names) - set(done)}")
        done += ready
    return done


def repr_value(value: Any) -> str:
    return json.dumps(value)


def docstring(text: str, indent: str) -> list[str]:
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    width = 100 - len(indent) - 6
    lines = textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False)
    if lines[-1].endswith('"'):
        lines[-1] += " "  # keep the closing quotes apart from a quote in the text
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    return [f'{indent}"""{lines[0]}', *(f"{indent}{line}" for line in lines[1:]), f'{indent}"""']


# --- Driver ---------------------------------------------------------------------------------


def generate(spec_dir: Path) -> str:
    """The text of ``types.py`` before formatting."""
    schemas = {
        name: json.loads((spec_dir / name / "schema.json").read_text(encoding="utf-8"))
        for name in REVISIONS
    }
    known = {d for schema in schemas.values() for d in schema["$defs"]}
    revisions = [Revision(name, schema, known) for name, schema in schemas.items()]
    return Emitter(Model(revisions)).render()


def ruff_format(source: str) -> str:
    """Format with the project's ruff settings (found from the real file's path)."""
    result = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--stdin-filename", str(DEFAULT_OUTPUT), "-"],
        input=source,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise SystemExit(f"ruff format failed (is the dev environment set up?):\n{result.stderr}")
    return result.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate src/mcp_sansio/types.py.")
    parser.add_argument("--spec-dir", type=Path, default=DEFAULT_SPEC_DIR)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    source = ruff_format(generate(args.spec_dir))
    args.output.write_text(source, encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
