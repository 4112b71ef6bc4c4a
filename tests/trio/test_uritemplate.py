"""RFC 6570 levels 1-3: the RFC's example tables, matching rules, and round trips."""

from __future__ import annotations

import re
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_trio._uritemplate import MAX_MATCH_LENGTH, UriTemplate

# RFC 6570 section 3.2, the variables of the examples (the level 1-3 ones: strings only).
RFC_VARS: dict[str, str | None] = {
    "dub": "me/too",
    "hello": "Hello World!",
    "half": "50%",
    "var": "value",
    "who": "fred",
    "base": "http://example.com/home/",
    "path": "/foo/bar",
    "v": "6",
    "x": "1024",
    "y": "768",
    "empty": "",
    "undef": None,
}

# RFC 6570 section 1.2 (levels 1 to 3) and the string examples of section 3.2.
RFC_EXAMPLES = [
    # Level 1: simple string expansion (1.2, 3.2.2)
    ("{var}", "value"),
    ("{hello}", "Hello%20World%21"),
    ("{half}", "50%25"),
    ("O{empty}X", "OX"),
    ("O{undef}X", "OX"),
    ("{x,y}", "1024,768"),
    ("{x,hello,y}", "1024,Hello%20World%21,768"),
    ("?{x,empty}", "?1024,"),
    ("?{x,undef}", "?1024"),
    ("?{undef,y}", "?768"),
    # Level 2: reserved expansion (1.2, 3.2.3)
    ("{+var}", "value"),
    ("{+hello}", "Hello%20World!"),
    ("{+half}", "50%25"),
    ("{base}index", "http%3A%2F%2Fexample.com%2Fhome%2Findex"),
    ("{+base}index", "http://example.com/home/index"),
    ("O{+empty}X", "OX"),
    ("O{+undef}X", "OX"),
    ("{+path}/here", "/foo/bar/here"),
    ("{+path}here", "/foo/barhere"),
    ("here?ref={+path}", "here?ref=/foo/bar"),
    ("up{+path}{var}/here", "up/foo/barvalue/here"),
    ("{+x,hello,y}", "1024,Hello%20World!,768"),
    ("{+path,x}/here", "/foo/bar,1024/here"),
    # Level 2: fragment expansion (1.2, 3.2.4)
    ("X{#var}", "X#value"),
    ("X{#hello}", "X#Hello%20World!"),
    ("{#var}", "#value"),
    ("{#hello}", "#Hello%20World!"),
    ("{#half}", "#50%25"),
    ("foo{#empty}", "foo#"),
    ("foo{#undef}", "foo"),
    ("{#x,hello,y}", "#1024,Hello%20World!,768"),
    ("{#path,x}/here", "#/foo/bar,1024/here"),
    # Level 3: label expansion (1.2, 3.2.5)
    ("X{.var}", "X.value"),
    ("X{.x,y}", "X.1024.768"),
    ("{.who}", ".fred"),
    ("{.who,who}", ".fred.fred"),
    ("{.half,who}", ".50%25.fred"),
    ("X{.empty}", "X."),
    ("X{.undef}", "X"),
    # Level 3: path segments (1.2, 3.2.6)
    ("{/var}", "/value"),
    ("{/var,x}/here", "/value/1024/here"),
    ("{/who}", "/fred"),
    ("{/who,who}", "/fred/fred"),
    ("{/half,who}", "/50%25/fred"),
    ("{/who,dub}", "/fred/me%2Ftoo"),
    ("{/var,empty}", "/value/"),
    ("{/var,undef}", "/value"),
    # Level 3: path-style parameters (1.2, 3.2.7)
    ("{;x,y}", ";x=1024;y=768"),
    ("{;x,y,empty}", ";x=1024;y=768;empty"),
    ("{;who}", ";who=fred"),
    ("{;half}", ";half=50%25"),
    ("{;empty}", ";empty"),
    ("{;v,empty,who}", ";v=6;empty;who=fred"),
    ("{;v,bar,who}", ";v=6;who=fred"),
    ("{;x,y,undef}", ";x=1024;y=768"),
    # Level 3: form-style query (1.2, 3.2.8)
    ("{?x,y}", "?x=1024&y=768"),
    ("{?x,y,empty}", "?x=1024&y=768&empty="),
    ("{?who}", "?who=fred"),
    ("{?half}", "?half=50%25"),
    ("{?x,y,undef}", "?x=1024&y=768"),
    # Level 3: form-style query continuation (1.2, 3.2.9)
    ("?fixed=yes{&x}", "?fixed=yes&x=1024"),
    ("{&x,y,empty}", "&x=1024&y=768&empty="),
    ("{&who}", "&who=fred"),
    ("{&half}", "&half=50%25"),
    # Level 1 literals and maps (1.2)
    ("map?{x,y}", "map?1024,768"),
]


@pytest.mark.parametrize(("template", "expected"), RFC_EXAMPLES)
def test_rfc_examples_expand(template: str, expected: str) -> None:
    assert UriTemplate(template).expand(RFC_VARS) == expected


def _invertible(template: str) -> bool:
    """Whether matching gives the values back: all positional variables non-empty."""
    for op, names in re.findall(r"\{([+#./;?&]?)([^}]*)\}", template):
        if op not in (";", "?", "&") and not all(RFC_VARS[name] for name in names.split(",")):
            return False
        # A {x}, {.x} or {/x} value must be one segment ("me/too" is not).
        if op in ("", ".", "/") and any("/" in (RFC_VARS[n] or "") for n in names.split(",")):
            return False
    # '{+path}' may stop anywhere, so '{var}' could take the tail of '/foo/bar'.
    return template != "up{+path}{var}/here"


@pytest.mark.parametrize(
    ("template", "expected"), [(t, e) for t, e in RFC_EXAMPLES if _invertible(t)]
)
def test_rfc_examples_match_back(template: str, expected: str) -> None:
    t = UriTemplate(template)
    values = {name: RFC_VARS[name] for name in t.variables if RFC_VARS.get(name) is not None}
    assert t.match(expected) == values


def test_rfc_examples_that_cannot_be_inverted() -> None:
    assert UriTemplate("X{.empty}").match("X.") is None
    assert UriTemplate("?{x,undef}").match("?1024") is None
    # A segment value holding '/' (see test_segment_values_are_one_segment).
    assert UriTemplate("{base}index").match("http%3A%2F%2Fexample.com%2Fhome%2Findex") is None
    assert UriTemplate("{/who,dub}").match("/fred/me%2Ftoo") is None
    assert UriTemplate("{+base}index").match("http://example.com/home/index") == {
        "base": "http://example.com/home/"
    }
    template = UriTemplate("up{+path}{var}/here")  # where does path end?
    assert template.expand(RFC_VARS) == "up/foo/barvalue/here"
    assert not template.matchable
    with pytest.raises(ValueError, match="cannot be matched: an expression without a prefix"):
        template.match("up/foo/barvalue/here")


def test_match_decodes_percent_escapes() -> None:
    assert UriTemplate("{hello}").match("Hello%20World%21") == {"hello": "Hello World!"}
    assert UriTemplate("{+hello}").match("Hello%20World!") == {"hello": "Hello World!"}
    assert UriTemplate("{x}").match("caf%C3%A9") == {"x": "café"}


def test_named_expressions_match_empty_and_missing() -> None:
    t = UriTemplate("{;x,y,empty}")
    assert t.match(";x=1024;y=768;empty") == {"x": "1024", "y": "768", "empty": ""}
    assert t.match(";y=768;x=1024") == {"x": "1024", "y": "768"}
    assert t.match("") == {}
    q = UriTemplate("search{?q,lang}")
    assert q.match("search") == {}
    assert q.match("search?lang=en&q=trio") == {"q": "trio", "lang": "en"}
    assert q.match("search?q=") == {"q": ""}
    assert q.match("search?q") == {"q": ""}
    assert q.match("search?q=a&q=b") is None  # duplicates
    assert q.match("search?other=1") is None  # undeclared name
    assert q.match("search?qq=1") is None  # a name that only starts like a declared one


def test_consecutive_query_expressions() -> None:
    t = UriTemplate("/s{?x}{&y}")
    assert t.match("/s?x=1&y=2") == {"x": "1", "y": "2"}
    assert t.expand(x=1, y=2) == "/s?x=1&y=2"


def test_simple_variable_does_not_cross_segments() -> None:
    t = UriTemplate("users://{user_id}/profile")
    assert t.match("users://alice/profile") == {"user_id": "alice"}
    assert t.match("users://alice@example.com/profile") == {"user_id": "alice@example.com"}
    assert t.match("users://a/b/profile") is None
    assert t.match("users:///profile") is None  # positional variables are non-empty
    assert t.match("users://alice/profile?x=1") is None
    assert t.match("users://alice/profilex") is None


@pytest.mark.parametrize(
    "value",
    [
        "..%2Fsecret.txt",
        "%2Fetc%2Fhostname",
        "a%2Fb",
        "a%5Cb",
        "..%5C..%5Cwin.ini",
        "a%00b",
        "..",
        "%2E%2E",
        ".",
        "%2e",
    ],
)
def test_segment_values_are_one_segment(value: str) -> None:
    # The security review's path traversal: '{name}' reads as one segment, so a value that
    # decodes to a separator, a NUL, '.' or '..' does not match (server/resources.mdx:
    # "Servers MUST validate all resource URIs").
    assert UriTemplate("file:///docs/{name}").match("file:///docs/" + value) is None
    assert UriTemplate("file:///docs{/name}").match("file:///docs/" + value) is None
    assert UriTemplate("file:///docs/x{.ext}").match("file:///docs/x." + value) is None
    assert UriTemplate("file:///{a,name}").match("file:///a," + value) is None
    # Reserved expansion spans segments by design; named expressions are parameters.
    decoded = unquote(value)
    assert UriTemplate("file:///docs/{+name}").match("file:///docs/" + value) == {"name": decoded}
    assert UriTemplate("doc{#name}").match("doc#" + value) == {"name": decoded}
    for template, uri in [("s{?q}", "s?q="), ("s{&q}", "s&q="), ("s{;q}", "s;q=")]:
        assert UriTemplate(template).match(uri + value) == {"q": decoded}


def test_segment_values_may_hold_dots_and_other_text() -> None:
    t = UriTemplate("file:///docs/{name}")
    for value, decoded in [
        ("...", "..."),
        ("..a", "..a"),
        ("a..b", "a..b"),
        (".hidden", ".hidden"),
        ("a%20b~%3A", "a b~:"),
        ("%25", "%"),
    ]:
        assert t.match("file:///docs/" + value) == {"name": decoded}


def test_reserved_and_fragment_may_contain_slashes() -> None:
    t = UriTemplate("file:///{+path}{?rev}")
    assert t.match("file:///a/b/c.txt") == {"path": "a/b/c.txt"}
    assert t.match("file:///a/b?rev=2") == {"path": "a/b", "rev": "2"}
    assert UriTemplate("doc{#section}").match("doc#a/b?c") == {"section": "a/b?c"}
    assert UriTemplate("{+a}/{b}").match("x/y/z") == {"a": "x/y", "b": "z"}


def test_label_and_path_operators() -> None:
    assert UriTemplate("{name}{.ext}").match("archive.gz") == {"name": "archive", "ext": "gz"}
    # 'name' stops at the first '.', and '{.ext}' cannot contain one.
    assert UriTemplate("{name}{.ext}").match("archive.tar.gz") is None
    assert UriTemplate("{name}{.a,b}").match("archive.tar.gz") == {
        "name": "archive",
        "a": "tar",
        "b": "gz",
    }
    assert UriTemplate("/files{/dir,name}").match("/files/a/b") == {"dir": "a", "name": "b"}
    assert UriTemplate("/files{/dir,name}").match("/files/a/b/c") is None


def test_values_stop_at_what_follows_them() -> None:
    t = UriTemplate("logs://{year}-{month}-{day}")
    assert t.match("logs://2024-05-06") == {"year": "2024", "month": "05", "day": "06"}
    assert t.match("logs://2024-05-06-07") == {"year": "2024", "month": "05", "day": "06-07"}
    assert UriTemplate("{x}{;p}").match("a;p=1") == {"x": "a", "p": "1"}
    assert UriTemplate("{x}{;p}-end").match("a-end") == {"x": "a"}
    assert UriTemplate("{x}{;p}-end").match("a-b-end") is None  # 'x' stops at '-'
    assert UriTemplate("{x}{;p}-end").match("a;p=1-end") == {"x": "a", "p": "1"}
    assert UriTemplate("{x}{;p}-end").match("a;p=1-2-end") is None  # so does 'p'
    assert UriTemplate("{x}{;p}-end").match("a;p-end") == {"x": "a", "p": ""}
    assert UriTemplate("{+path}/edit").match("a/b/edit") == {"path": "a/b"}
    assert UriTemplate("{+path}/edit{?v}").match("a/b/edit?v=1") == {"path": "a/b", "v": "1"}
    assert UriTemplate("{+a,b}").match("x/y,z") == {"a": "x/y", "b": "z"}


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("{a}{b}", "without a prefix"),
        ("{+a}{b}", "without a prefix"),
        ("{a}{?q}{b}", "without a prefix"),
        ("{+a}/{+b}", "comes after 'a'"),
        ("{#a}/{+b}", "comes after 'a'"),
        ("{+a}/{+b,c}", "comes after 'a'"),
    ],
)
def test_templates_that_cannot_be_matched(template: str, problem: str) -> None:
    t = UriTemplate(template)
    assert not t.matchable
    assert t.expand(a="1", b="2", c="3")
    with pytest.raises(ValueError, match=problem):
        t.match("anything")


@pytest.mark.parametrize(
    "template",
    [
        "{a}{.b}",
        "{a}{/b}",
        "{+a}{?q}{#f}",
        "{+a}/{b}{#f}",
        "{+a}x{#b}",
        "{#a}/x",
        "{+a}{#b}",
        "{x}{;p}{/y}",
    ],
)
def test_templates_that_can_be_matched(template: str) -> None:
    assert UriTemplate(template).matchable


def test_match_work_is_bounded() -> None:
    t = UriTemplate("res://{+a}/x{?q}")
    assert t.match("res://" + "a" * (MAX_MATCH_LENGTH - 8) + "/x") is not None
    assert t.match("res://" + "a" * MAX_MATCH_LENGTH + "/x") is None
    # Inputs that would make a backtracking matcher explore every split finish quickly.
    for template, uri in [
        ("{a}-{b}-{c}", "a-" * (MAX_MATCH_LENGTH // 2 - 1) + "/"),
        ("{+a}/x{?q}", ("/x?q=" * MAX_MATCH_LENGTH)[: MAX_MATCH_LENGTH - 1] + "#"),
        ("{+a}/{b}/{c}/{d}", "x/" * (MAX_MATCH_LENGTH // 2)),
        ("{+a}x{#b}", "x" * (MAX_MATCH_LENGTH - 2) + "##"),
        ("{+a}/{b}{#f}", "/" * (MAX_MATCH_LENGTH - 1) + "#"),
    ]:
        assert UriTemplate(template).match(uri) is None


def test_repeated_variable_must_agree() -> None:
    t = UriTemplate("{x}/{x}")
    assert t.match("a/a") == {"x": "a"}
    assert t.match("a/b") is None
    assert UriTemplate("{x}{?x}").match("a?x=b") is None


def test_invalid_utf8_does_not_match() -> None:
    assert UriTemplate("{x}").match("%FF") is None
    assert UriTemplate("{?x}").match("?x=%FF") is None


def test_literals_are_encoded_on_expansion_and_matched_as_such() -> None:
    t = UriTemplate("notes://my notes/{id}")
    assert t.expand(id="1") == "notes://my%20notes/1"
    assert t.match("notes://my%20notes/1") == {"id": "1"}


def test_variables_in_order_without_repeats() -> None:
    t = UriTemplate("{a}/{+b}{?c,a}{&d}{#e}{.f}{/g}{;h}")
    assert t.variables == ("a", "b", "c", "d", "e", "f", "g", "h")
    assert UriTemplate("plain://x").variables == ()


def test_value_types() -> None:
    t = UriTemplate("item/{id}")
    assert t.expand(id=42) == "item/42"
    assert t.expand({"id": "x"}, id="y") == "item/y"
    assert UriTemplate("{a.b}").expand({"a.b": "c"}) == "c"
    with pytest.raises(TypeError, match="'id' must be a str or an int"):
        t.expand(id=["a"])
    with pytest.raises(TypeError, match="got bool"):
        t.expand(id=True)


def test_value_semantics() -> None:
    assert UriTemplate("{x}") == UriTemplate("{x}")
    assert hash(UriTemplate("{x}")) == hash(UriTemplate("{x}"))
    assert str(UriTemplate("a{x}")) == "a{x}"
    assert repr(UriTemplate("a{x}")) == "UriTemplate(template='a{x}')"


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{x", "unclosed"),
        ("x}", "unmatched"),
        ("{}", "invalid variable name"),
        ("{x,}", "invalid variable name"),
        ("{a b}", "invalid variable name"),
        ("{x.}", "invalid variable name"),
        ("{=x}", "reserved operator"),
        ("{|x}", "reserved operator"),
        ("{x:3}", "level 4"),
        ("{x*}", "level 4"),
        ("{?x,y*}", "level 4"),
    ],
)
def test_malformed_templates(template: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        UriTemplate(template)


# Round trips: expand then match gives the values back.
safe_text = st.text(
    st.characters(codec="utf-8", exclude_categories=["Cs"], exclude_characters="%"),
    max_size=12,
)
nonempty_text = safe_text.filter(lambda s: s != "")
#: A segment value ({x}, {.x}, {/x}) is one segment: the others do not match.
segment_text = nonempty_text.filter(lambda s: s not in (".", "..") and not set(s) & set("/\\\0"))


@given(segment_text, segment_text, st.none() | safe_text, st.none() | safe_text)
def test_round_trip_path_and_query(a: str, b: str, q: str | None, r: str | None) -> None:
    t = UriTemplate("res://{a}/x{/b}{?q,r}")
    values = {"a": a, "b": b, "q": q, "r": r}
    uri = t.expand(values)
    assert t.match(uri) == {k: v for k, v in values.items() if v is not None}


@given(
    nonempty_text.filter(lambda s: "#" not in s and "," not in s),
    segment_text.filter(lambda s: "." not in s),  # '.' is unreserved: not escaped in {.x}
    nonempty_text,
    st.none() | safe_text,
)
def test_round_trip_all_operators(p: str, label: str, h: str, frag: str | None) -> None:
    t = UriTemplate("{+p}/x{.label}{;h}{&f}")
    values = {"p": p, "label": label, "h": h, "f": frag}
    assert t.match(t.expand(values)) == {k: v for k, v in values.items() if v is not None}
    t2 = UriTemplate("doc{#p,q}")
    assert t2.match(t2.expand(p=p, q=p[::-1])) == {"p": p, "q": p[::-1]}


@given(st.text(max_size=30))
def test_match_never_raises(uri: str) -> None:
    for template in ("{a}/{+b}{?c}", "{#x,y}", "{.a}{/b}{;c}", "x{&d}"):
        result = UriTemplate(template).match(uri)
        assert result is None or isinstance(result, dict)


def test_reserved_expansion_keeps_percent_escapes() -> None:
    assert UriTemplate("{+x}").expand(x="a%41b%zz") == "a%41b%25zz"
    assert UriTemplate("{x}").expand(x="a%41") == "a%2541"


@given(nonempty_text)
def test_segment_rule_holds_for_any_value(value: str) -> None:
    # A {x} value matches back exactly when it is one segment.
    t = UriTemplate("res://{a}/x")
    one = value not in (".", "..") and not set(value) & set("/\\\0")
    assert t.match(t.expand(a=value)) == ({"a": value} if one else None)
