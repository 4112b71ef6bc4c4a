"""RFC 6570 URI Templates, levels 1 to 3: expansion and matching.

MCP resource templates (``resources/templates/list``) are RFC 6570 templates. A server
expands them to build URIs and, more often, *matches* a URI from ``resources/read`` against
them to find the handler and its arguments.

Theory of operation
-------------------
A template is parsed once into literals and expressions (``{x}``, ``{+x}``, ``{#x}``, ``{.x}``,
``{/x}``, ``{;x}``, ``{?x}``, ``{&x}``, each with one or more comma-separated variables).
Level 4 modifiers (``{x:3}``, ``{x*}``) and the reserved operators ``= , ! @ |`` are refused
at construction, so a template either works fully or not at all.

**Expansion** follows RFC 6570 section 3.2 to the letter (the tests run the RFC's own example
table). Values are strings; an ``int`` is written in decimal; ``None`` means undefined and the
variable is left out.

**Matching** is the inverse, which RFC 6570 leaves undefined because expansion loses
information (an undefined and an empty variable look the same; ``{x,y}`` cannot tell which
one was left out). We compile one regular expression per template at construction, with
these rules:

* *Positional* expressions (``{x}``, ``{+x}``, ``{#x}``, ``{.x}``, ``{/x}``) need every
  variable, each non-empty. The *matched text* never contains its expression's
  delimiters: ``{x}`` stops at ``/ ? #`` (and ``,`` between several variables), so it never
  spans path segments of the URI; ``{.x}`` also stops at ``.``; ``{/x}`` at ``/``; ``{+x}``
  and ``{#x}`` only stop at ``#`` (and ``,``), so they may span segments. The *value* is
  that text percent-decoded (below), so it may well contain them.
* A value also stops at the first character that can follow it in the template, so that
  ``logs://{year}-{month}`` takes ``year`` up to the first ``-`` and ``{name}{.ext}`` takes
  ``name`` up to the first ``.`` (``a.tar.gz`` does not match it: ``{.ext}`` cannot contain
  a dot). This makes matching deterministic, and linear in the URI's length. The one
  exception is ``{+x}``/``{#x}`` followed by ``/`` or a literal (``{+path}/edit``): it
  takes as little as possible, so that what follows gets its part.
* *Named* expressions (``{;x}``, ``{?x,y}``, ``{&x}``) accept their variables in any order,
  each at most once, any of them missing; the whole expression may be missing. ``x`` with
  no ``=`` (or ``x=``) is the empty string. Names the expression does not declare do not
  match, and a duplicated name makes the whole match fail.
* Matched text is percent-decoded (UTF-8); invalid UTF-8 is no match. A variable that occurs
  twice in a template must match the same value both times.
* A *segment* value (``{x}``, ``{.x}``, ``{/x}``) must be one path segment once decoded:
  one that holds ``/``, ``\\`` or a NUL, or is ``.`` or ``..``, is no match (see below).

.. warning::
   Decoding is what makes matching the inverse of expansion (``{x}`` expands ``a/b`` to
   ``a%2Fb``), so without the segment rule ``file:///docs/{name}`` would match
   ``file:///docs/..%2Fsecret.txt`` with ``name == "../secret.txt"``. Authors reasonably
   read ``{name}`` as one segment, and servers MUST validate all resource URIs
   (server/resources, "Security Considerations"), so such a URI does not match: it falls
   through to later templates, then to "Resource not found". The rule only makes a value
   safe to use as *one path segment*; a handler still checks what it means (a value may
   hold any other character the client sent, such as a space, ``~`` or ``:``).

   Reserved expansion (``{+x}``, ``{#x}``) spans segments by design and named expressions
   (``{;x}``, ``{?x}``, ``{&x}``) are parameters: their values may hold ``/``, ``\\``,
   ``..``, a NUL or anything else, and a handler that turns one into a path, a query or a
   command must check it first (resolve the path and confirm it stays under its root,
   say), exactly as for any other untrusted input. ``{+x}`` is also the way to take a
   value that may hold an encoded slash (``a%2Fb``).

Some templates cannot be matched, though they expand fine: two expressions side by side
where the second has no prefix (``{a}{b}``, ``{+a}{b}``: nothing says where ``a`` ends), and
a ``{+x}`` after one of the exceptions above (``{+a}/{+b}``: ambiguous, and matching would
take time quadratic in the URI's length). :attr:`UriTemplate.matchable` says
which; ``match`` raises ``ValueError`` for them. To keep the work per request bounded
whatever the template, URIs longer than :data:`MAX_MATCH_LENGTH` never match.

So ``match(expand(values)) == values`` for non-empty values of positional variables that
avoid their delimiters and the character that follows them in the template (and ``%`` in
``{+x}``/``{#x}``, where escapes pass through unchanged on expansion; and, for segment
values, are one segment), and for any values of named variables.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from typing import final
from urllib.parse import quote, unquote

import attrs

__all__ = ["MAX_MATCH_LENGTH", "UriTemplate", "uri_problem"]

_RESERVED = ":/?#[]@!$&'()*+,;="
_PCT_TRIPLET = re.compile(r"%[0-9A-Fa-f]{2}")
_VARNAME = re.compile(r"(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2})(?:\.?(?:[A-Za-z0-9_]|%[0-9A-Fa-f]{2}))*")
#: A character that may continue a variable name (so ``x`` does not match the name ``xy``).
_NAME_GOES_ON = r"(?![A-Za-z0-9_.%])"


# RFC 3986 section 3 (appendix A), as regular expressions. Every repetition is over
# disjoint alternatives, so checking a URI is linear in its length.
_UNRESERVED = r"A-Za-z0-9\-._~"
_SUB_DELIMS = r"!$&'()*+,;="
_PCT_ENCODED = r"%[0-9A-Fa-f]{2}"
_PCHAR = rf"(?:[{_UNRESERVED}{_SUB_DELIMS}:@]|{_PCT_ENCODED})"
_AUTHORITY = (
    rf"(?:(?:[{_UNRESERVED}{_SUB_DELIMS}:]|{_PCT_ENCODED})*@)?"  # userinfo
    rf"(?:\[(?P<ip>[^\]]*)\]|(?:[{_UNRESERVED}{_SUB_DELIMS}]|{_PCT_ENCODED})*)"  # host
    r"(?::[0-9]*)?"  # port
)
_URI = re.compile(
    r"[A-Za-z][A-Za-z0-9+.\-]*:"  # scheme
    rf"(?://{_AUTHORITY}(?:/{_PCHAR}*)*"  # "//" authority path-abempty
    rf"|/?(?:{_PCHAR}+(?:/{_PCHAR}*)*)?)"  # path-absolute / path-rootless / path-empty
    rf"(?:\?(?:{_PCHAR}|[/?])*)?"  # query
    rf"(?:#(?:{_PCHAR}|[/?])*)?"  # fragment
)
_IP_FUTURE = re.compile(rf"[vV][0-9A-Fa-f]+\.[{_UNRESERVED}{_SUB_DELIMS}:]+")
_URI_CHAR = re.compile(rf"[{_UNRESERVED}{_SUB_DELIMS}:/?#\[\]@%]")
#: What stands for each variable when a template's own text is checked (the second for
#: places a digit cannot be, such as a scheme; the first for a port).
_PLACEHOLDERS = ("0", "x")
URI_HINT = (
    "(percent-encode everything else, as UTF-8 bytes: 'é' as '%C3%A9', a space as '%20', "
    "'[' and ']' outside an IPv6 host as '%5B' and '%5D'; IRIs are not URIs)"
)
"""Said after what :func:`uri_problem` finds, in the errors that refuse a URI."""
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")


def uri_problem(uri: str) -> str | None:
    """Why ``uri`` is not an RFC 3986 URI (``scheme ":" hier-part [ "?" query ] [ "#"
    fragment ]``: ASCII only, other characters percent-encoded), or ``None`` when it is.

    A pure syntax check (``server/resources.mdx``: "Custom URI schemes MUST be in
    accordance with RFC3986"; the schema's ``Resource.uri`` is ``format: uri``), linear in
    the URI's length. An IP literal's address is checked too (IPv6, or ``vX.…``). IRIs
    (RFC 3987: ``https://例え.jp/``, ``file:///café``) are refused, and so are a raw
    ``[`` or ``]`` outside an IP literal (``?q=[1]``): percent-encode them.
    """
    found = _URI.fullmatch(uri)
    if found is not None:
        ip = found.group("ip")
        if ip is None or _IP_FUTURE.fullmatch(ip) or _ipv6(ip):
            return None
        return f"[{ip}] is not an IPv6 address"
    if _SCHEME.match(uri) is None:
        return "it has no scheme (a letter, then letters, digits, '+', '-' or '.', then ':')"
    for at, char in enumerate(uri):
        if _URI_CHAR.fullmatch(char) is None:
            return f"{char!r} at {at} must be percent-encoded"
        if char == "%" and re.fullmatch(_PCT_ENCODED, uri[at : at + 3]) is None:
            return f"'%' at {at} does not start a percent-escape (%XX)"
    return "its authority, path, query or fragment is malformed (RFC 3986 section 3)"


def _in_brackets(parts: Sequence[str | _Expression], at: int) -> bool:
    """Whether the expression ``parts[at]`` is all of an IP literal: ``[`` before it,
    ``]`` after."""
    before = parts[at - 1] if at else ""
    after = parts[at + 1] if at + 1 < len(parts) else ""
    return (
        isinstance(before, str)
        and before.endswith("[")
        and isinstance(after, str)
        and after.startswith("]")
    )


def _ipv6(text: str) -> bool:
    if "%" in text:  # (a zone ID: RFC 6874, not RFC 3986)
        return False
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


@attrs.frozen
class _Operator:
    first: str
    """Written before the first defined variable."""
    sep: str
    """Written between defined variables."""
    named: bool
    """Whether each value is written as ``name=value``."""
    ifemp: str
    """Written after the name when the value is empty (named operators only)."""
    reserved: bool
    """Whether reserved characters and percent-escapes pass through unencoded."""
    stops: str
    """Characters the matched text never contains: the expression's delimiters (its
    percent-decoded value may contain them; see the module docstring's warning)."""
    segment: bool = attrs.field(init=False)
    """Whether a matched value must be one path segment (:func:`_one_segment`): that of
    a positional expression not of reserved expansion (``{x}``, ``{.x}``, ``{/x}``).
    (Stored, not a property: it is read on each match.)"""

    @segment.default
    def _segment(self) -> bool:
        return not (self.named or self.reserved)


# RFC 6570 appendix A, plus our matching rules (see the module docstring).
_OPERATORS = {
    "": _Operator("", ",", named=False, ifemp="", reserved=False, stops="/?#"),
    "+": _Operator("", ",", named=False, ifemp="", reserved=True, stops="#"),
    "#": _Operator("#", ",", named=False, ifemp="", reserved=True, stops="#"),
    ".": _Operator(".", ".", named=False, ifemp="", reserved=False, stops="/?#."),
    "/": _Operator("/", "/", named=False, ifemp="", reserved=False, stops="/?#"),
    ";": _Operator(";", ";", named=True, ifemp="", reserved=False, stops=";/?#"),
    "?": _Operator("?", "&", named=True, ifemp="=", reserved=False, stops="&#"),
    "&": _Operator("&", "&", named=True, ifemp="=", reserved=False, stops="&#"),
}
#: What a ``{+x}``/``{#x}`` value leaves to what follows it: these characters start named
#: expressions or separate values; a ``/`` or a literal's first character is kept.
_RESERVED_YIELDS = frozenset("?&;,#")
#: URIs longer than this never match: the work per ``match`` stays bounded.
MAX_MATCH_LENGTH = 16 * 1024
#: What a segment value may not hold once decoded: a path separator (POSIX or Windows) or
#: a NUL (which ends a C string, so a path, early).
_NOT_IN_SEGMENT = re.compile(r"[/\\\x00]")


def _one_segment(value: str) -> bool:
    """Whether ``value`` can only name one path segment: no ``/``, ``\\`` or NUL, and
    not ``.`` or ``..`` (which name this directory or its parent, RFC 3986 section
    3.3)."""
    return value not in (".", "..") and _NOT_IN_SEGMENT.search(value) is None


@attrs.frozen
class _Expression:
    operator: _Operator
    names: tuple[str, ...]


#: A regex group: its name, the variable it captures (``None`` for a named expression's
#: whole text) and the expression it belongs to.
_Group = tuple[str, str | None, _Expression]


def _encode(value: str, *, reserved: bool) -> str:
    """Percent-encode for the unreserved set U, or U+R keeping existing escapes."""
    if not reserved:
        return quote(value, safe="")
    out: list[str] = []
    pos = 0
    for escape in _PCT_TRIPLET.finditer(value):
        out.append(quote(value[pos : escape.start()], safe=_RESERVED))
        out.append(escape.group())
        pos = escape.end()
    out.append(quote(value[pos:], safe=_RESERVED))
    return "".join(out)


def _parse(template: str) -> tuple[str | _Expression, ...]:
    parts: list[str | _Expression] = []
    pos = 0
    while pos < len(template):
        start = template.find("{", pos)
        close = template.find("}", pos)
        if close != -1 and (start == -1 or close < start):
            raise ValueError(f"unmatched '}}' at {close} in URI template {template!r}")
        if start == -1:
            parts.append(template[pos:])
            break
        if start > pos:
            parts.append(template[pos:start])
        end = template.find("}", start)
        if end == -1:
            raise ValueError(f"unclosed '{{' at {start} in URI template {template!r}")
        parts.append(_parse_expression(template[start + 1 : end], template, start))
        pos = end + 1
    return tuple(parts)


def _parse_expression(body: str, template: str, at: int) -> _Expression:
    where = f"in expression at {at} of URI template {template!r}"
    op = body[:1]
    if op in _OPERATORS and op != "":
        body = body[1:]
    elif op in ("=", ",", "!", "@", "|"):
        raise ValueError(f"reserved operator {op!r} {where}")
    else:
        op = ""
    names: list[str] = []
    for spec in body.split(","):
        if spec.endswith("*") or ":" in spec:
            raise ValueError(f"level 4 modifier in {spec!r} {where} is not supported")
        if not _VARNAME.fullmatch(spec):
            raise ValueError(f"invalid variable name {spec!r} {where}")
        names.append(spec)
    return _Expression(_OPERATORS[op], tuple(names))


def _expand_expression(expr: _Expression, values: Mapping[str, object]) -> str:
    op = expr.operator
    out: list[str] = []
    for name in expr.names:
        value = values.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise TypeError(
                f"URI template variable {name!r} must be a str or an int (level 4 lists and"
                f" mappings are not supported), got {type(value).__name__}"
            )
        text = str(value)
        out.append(op.sep if out else op.first)
        if op.named:
            out.append(name)
            out.append(op.ifemp if text == "" else "=")
            if text == "":
                continue
        out.append(_encode(text, reserved=op.reserved))
    return "".join(out)


def _follow(parts: tuple[str | _Expression, ...], i: int) -> frozenset[str] | None:
    """The characters that may come right after part ``i`` (the URI may also end there).

    ``None`` when an expression without a prefix may come next: then nothing does.
    """
    chars: set[str] = set()
    for part in parts[i + 1 :]:
        if isinstance(part, str):
            chars.add(_encode(part, reserved=True)[0])
            break
        if not part.operator.first:
            return None
        chars.add(part.operator.first)
        if not part.operator.named:  # a positional expression is always there
            break
    return frozenset(chars)


def _char_class(excluded: set[str]) -> str:
    return "[^" + "".join(re.escape(c) for c in sorted(excluded)) + "]"


@attrs.frozen
class _Matcher:
    regex: re.Pattern[str]
    groups: tuple[_Group, ...]
    problem: str | None
    """Why the template cannot be matched, if it cannot."""


def _compile(parts: tuple[str | _Expression, ...]) -> _Matcher:
    pieces: list[str] = []
    groups: list[_Group] = []
    problem = None
    lazy: str | None = None  # the variable that takes as little as possible, if any
    for i, part in enumerate(parts):
        if isinstance(part, str):
            pieces.append(re.escape(_encode(part, reserved=True)))
            continue
        op = part.operator
        follow = _follow(parts, i)
        if follow is None:
            problem = "an expression without a prefix follows another one directly"
            follow = frozenset()
        if op.named:
            group = f"g{len(groups)}"
            groups.append((group, None, part))
            value = _char_class({*op.stops, op.sep, *follow}) + "*+"
            names = "|".join(re.escape(n) for n in sorted(set(part.names), key=len, reverse=True))
            pair = f"(?:{names}){_NAME_GOES_ON}(?:={value})?"
            sep = re.escape(op.sep)
            pieces.append(f"(?:{re.escape(op.first)}(?P<{group}>{pair}(?:{sep}{pair})*))?")
            continue
        for j, name in enumerate(part.names):
            group = f"g{len(groups)}"
            groups.append((group, name, part))
            after = frozenset(op.sep) if j < len(part.names) - 1 else follow
            excluded = {*op.stops, *(after & _RESERVED_YIELDS if op.reserved else after)}
            quantifier = "++"
            # The URI has one '#' at most, so {#x} has one place to start; {+x} has many.
            if op.reserved and not op.first and lazy is not None and problem is None:
                problem = f"{{+{name}}} comes after {lazy!r}, and both may span '/'"
            if op.reserved and after - excluded:
                quantifier, lazy = "+?", name
            lead = op.first if j == 0 else op.sep
            pieces.append(f"{re.escape(lead)}(?P<{group}>{_char_class(excluded)}{quantifier})")
    return _Matcher(re.compile("".join(pieces)), tuple(groups), problem)


@final
@attrs.frozen
class UriTemplate:
    """An RFC 6570 URI template (levels 1 to 3), compiled for expansion and matching.

    >>> t = UriTemplate("file:///{+path}{?rev}")
    >>> t.expand(path="a b/c", rev=3)
    'file:///a%20b/c?rev=3'
    >>> t.match("file:///a%20b/c?rev=3")
    {'path': 'a b/c', 'rev': '3'}

    See the module docstring for the matching rules.

    Raises:
        ValueError: the template is malformed or uses level 4 features (raised by the
            constructor; a template that expands but cannot be matched is accepted).
    """

    template: str
    """The template text, as given."""
    _parts: tuple[str | _Expression, ...] = attrs.field(init=False, repr=False, eq=False)
    _matcher: _Matcher = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        parts = _parse(self.template)
        object.__setattr__(self, "_parts", parts)
        object.__setattr__(self, "_matcher", _compile(parts))

    def __str__(self) -> str:
        return self.template

    @property
    def matchable(self) -> bool:
        """Whether :meth:`match` works for this template (see the module docstring)."""
        return self._matcher.problem is None

    def uri_problem(self) -> str | None:
        """Why the URIs this template makes are not RFC 3986 URIs (:func:`uri_problem`),
        judged on its own text: its literals as they are, each expression expanded with
        a placeholder for every variable (``0``, else ``x``: a port takes one, a scheme
        the other; an expression that is a whole IP literal, ``[{addr}]``, stands for
        ``::1``). A template that begins with a reserved expression (``{+uri}``,
        ``{+base}/x``) may take its scheme from its value: one is not required of its
        own text (``{x}`` percent-encodes a ``:``, so cannot). ``None`` when they are
        URIs."""
        parts = self._parts
        first = parts[0] if parts else ""
        # Whether the first expression's value may bring the scheme.
        from_value = (
            not isinstance(first, str) and first.operator.reserved and first.operator.first == ""
        )
        problem = None
        for placeholder in _PLACEHOLDERS:
            values = dict.fromkeys(self.variables, placeholder)
            pieces = []
            for at, part in enumerate(parts):
                if isinstance(part, str):
                    pieces.append(part)
                elif _in_brackets(parts, at):
                    pieces.append("::1")
                else:
                    pieces.append(_expand_expression(part, values))
            skeleton = "".join(pieces)
            if from_value and not _SCHEME.match(skeleton):
                skeleton = "x:" + skeleton  # (a {+x} value passes ':' through)
            problem = uri_problem(skeleton)
            if problem is None:
                return None
        return problem

    @property
    def variables(self) -> tuple[str, ...]:
        """The variable names, in order of first appearance, without repeats."""
        names: dict[str, None] = {}
        for part in self._parts:
            if isinstance(part, _Expression):
                names.update(dict.fromkeys(part.names))
        return tuple(names)

    def expand(self, values: Mapping[str, object] | None = None, /, **kwargs: object) -> str:
        """The URI for these variable values (RFC 6570 section 3.2).

        Args:
            values: variable values by name (needed for names that are not identifiers,
                such as ``a.b``); ``kwargs`` are merged over it.
            kwargs: variable values by name. A value is a ``str`` or an ``int``; ``None``
                or a missing name means undefined.

        Raises:
            TypeError: a value is neither a ``str``, an ``int`` nor ``None``.
        """
        merged = {**(values or {}), **kwargs}
        return "".join(
            _encode(part, reserved=True)
            if isinstance(part, str)
            else _expand_expression(part, merged)
            for part in self._parts
        )

    def match(self, uri: str) -> dict[str, str] | None:
        """The decoded variable values if ``uri`` fits the template, else ``None``.

        Values are percent-decoded. A ``{x}``, ``{.x}`` or ``{/x}`` value must be one path
        segment: ``file:///{name}`` does not match ``file:///..%2Fetc`` (nor ``%2E%2E``,
        ``a%5Cb`` or ``a%00``). The values of ``{+x}``, ``{#x}`` and named expressions may
        hold ``/``, ``..`` or any other text. All are the client's input, to be validated
        before use (see the module docstring's warning).

        Variables of named expressions (``{?x}``, ``{;x}``, ``{&x}``) that the URI leaves
        out are absent from the result; all others are always present. URIs longer than
        :data:`MAX_MATCH_LENGTH` never match.

        Raises:
            ValueError: the template cannot be matched (:attr:`matchable` is false).
        """
        matcher = self._matcher
        if matcher.problem is not None:
            raise ValueError(f"URI template {self.template!r} cannot be matched: {matcher.problem}")
        found = matcher.regex.fullmatch(uri) if len(uri) <= MAX_MATCH_LENGTH else None
        if found is None:
            return None
        result: dict[str, str] = {}
        try:
            for group, name, expr in matcher.groups:
                text = found.group(group)
                if name is not None:
                    value = unquote(text, errors="strict")
                    if expr.operator.segment and not _one_segment(value):
                        return None  # (see the module docstring's warning)
                    items = [(name, value)]
                elif text is None:
                    continue
                else:
                    pairs = [p.partition("=") for p in text.split(expr.operator.sep)]
                    if len({n for n, _, _ in pairs}) != len(pairs):
                        return None
                    items = [(n, unquote(value, errors="strict")) for n, _, value in pairs]
                for key, value in items:
                    if result.setdefault(key, value) != value:
                        return None
        except UnicodeDecodeError:
            return None
        return result
