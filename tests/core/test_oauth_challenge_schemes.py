"""``WWW-Authenticate`` with both ``Bearer`` and ``DPoP`` challenges (RFC 9449 section
7.1 lets a resource server offer both): the client reads them as one, whichever comes
first (``2026-07-28`` authorization-server-discovery: the resource metadata URL "from the
parsed ``WWW-Authenticate`` headers when present"; authorization, "Scope Challenge
Handling": the challenge's scopes are authoritative)."""

from __future__ import annotations

import pytest

from mcp_sansio import BearerChallenge, parse_bearer_challenge, response_challenge

PRM = "https://rs.example/.well-known/oauth-protected-resource/mcp"


@pytest.mark.parametrize(
    "values",
    [
        [f'DPoP algs="ES256", Bearer resource_metadata="{PRM}", scope="files:read"'],
        ['DPoP algs="ES256"', f'Bearer resource_metadata="{PRM}", scope="files:read"'],
        [f'Bearer realm="mcp", DPoP algs="ES256", resource_metadata="{PRM}", scope="files:read"'],
        # Each parameter from the first challenge that has it.
        [f'DPoP algs="ES256", scope="files:read", Bearer resource_metadata="{PRM}"'],
    ],
)
def test_the_parameters_come_from_whichever_challenge_has_them(values: list[str]) -> None:
    expected = BearerChallenge(resource_metadata=PRM, scope="files:read")
    assert parse_bearer_challenge(values) == expected
    assert response_challenge(401, values) == expected


def test_a_step_up_behind_a_bare_dpop_challenge_is_one() -> None:
    values = [
        'DPoP algs="ES256", Bearer error="insufficient_scope", scope="files:write", '
        f'resource_metadata="{PRM}", error_description="needs write"'
    ]
    assert response_challenge(403, values) == BearerChallenge(
        resource_metadata=PRM,
        scope="files:write",
        error="insufficient_scope",
        error_description="needs write",
    )


def test_the_challenge_with_the_error_brings_its_own_scope_first() -> None:
    # The error is the first challenge's that has one; its scope and metadata URL come
    # before another challenge's (they are what that refusal asks for).
    values = [
        'Bearer scope="a", resource_metadata="https://x.example/prm", '
        'DPoP error="insufficient_scope", scope="b", resource_metadata="https://y.example/prm"'
    ]
    assert parse_bearer_challenge(values) == BearerChallenge(
        resource_metadata="https://y.example/prm", scope="b", error="insufficient_scope"
    )
    # The first error wins over a later one.
    values = ['Bearer error="insufficient_scope", scope="a", DPoP error="invalid_token"']
    assert parse_bearer_challenge(values) == BearerChallenge(scope="a", error="insufficient_scope")


def test_a_dpop_nonce_challenge_still_wins_and_keeps_the_others_parameters() -> None:
    values = [
        f'Bearer error="invalid_token", resource_metadata="{PRM}", scope="a", '
        'DPoP error="use_dpop_nonce", error_description="fresh"'
    ]
    assert parse_bearer_challenge(values) == BearerChallenge(
        resource_metadata=PRM, scope="a", error="use_dpop_nonce", error_description="fresh"
    )
    # A later use_dpop_nonce does not replace an earlier one; another scheme is ignored.
    values = [
        'DPoP error="use_dpop_nonce", error_description="one"',
        'DPoP error="use_dpop_nonce", error_description="two", Basic error="x"',
    ]
    assert parse_bearer_challenge(values) == BearerChallenge(
        error="use_dpop_nonce", error_description="one"
    )


def test_many_challenges_are_read_in_one_pass() -> None:
    # A header of many bare challenges (a hostile or broken server) still yields the
    # one that carries the parameters, at the end.
    values = ['DPoP algs="ES256", ' * 5000 + f'Bearer resource_metadata="{PRM}", scope="s"']
    assert parse_bearer_challenge(values) == BearerChallenge(resource_metadata=PRM, scope="s")
    assert parse_bearer_challenge(["DPoP, " * 5000]) == BearerChallenge()
