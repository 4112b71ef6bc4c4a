"""The tasks extension (``io.modelcontextprotocol/tasks``) as pure rules and frozen values.

Theory of operation
-------------------
The extension (`ext-tasks, specification/draft/tasks
<https://github.com/modelcontextprotocol/ext-tasks>`_; overview in the spec's
``docs/extensions/tasks``) lets a modern server answer a ``tools/call`` with a durable
*handle* instead of the result: a ``CreateTaskResult`` (``resultType: "task"``). The client
then polls ``tasks/get``, answers mid-flight questions with ``tasks/update`` and may ask for
``tasks/cancel``. Three things make it safe to bolt onto the stateless era:

* **Per-request opt-in.** The client declares the extension in *that request's*
  ``clientCapabilities``; a server MUST NOT return a task to a request that did not, and
  the ``tasks/*`` methods themselves answer -32021 without it. :func:`declares_tasks` is the
  one test, and :func:`may_return_task` what the core checks before it lets a
  ``resultType: "task"`` result out.
* **A state machine with three terminal states.** ``working`` and ``input_required`` may
  alternate; ``completed``, ``failed`` and ``cancelled`` are final. :data:`TRANSITIONS` is
  the table, :meth:`Task.moved_to` the only way to change a :class:`Task`.
* **Two shapes of the same record.** The ``CreateTaskResult`` is the bare task plus
  ``resultType: "task"``; a ``tasks/get`` answer (a ``DetailedTask``) adds exactly one of
  ``result`` (completed), ``error`` (failed) or ``inputRequests`` (input_required) and is an
  ordinary complete result. Neither carries ``requestState``: that belongs to MRTR, which a
  task's questions do not use.

Nothing here keeps a store, runs work or reads a clock: times are passed in (``now`` is
wall-clock seconds since the epoch, used for the ISO 8601 timestamps only). The binding owns
the table of tasks, their bounds, their expiry and the work itself.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Mapping
from typing import Any, Final, Literal, final

import attrs

from ._errors import ErrorCode, ErrorData, LocalProtocolError
from ._json import Fragment
from ._versions import declares_extension

__all__ = [
    "DEFAULT_POLL_INTERVAL_MS",
    "MAX_POLL_INTERVAL_MS",
    "MIN_POLL_INTERVAL_MS",
    "NAME_KEYS",
    "RESULT_TYPE_TASK",
    "TASKS_CANCEL",
    "TASKS_EXTENSION",
    "TASKS_GET",
    "TASKS_NOTIFICATION",
    "TASKS_UPDATE",
    "TASK_SUPPORTED_METHODS",
    "TERMINAL_STATUSES",
    "TRANSITIONS",
    "Task",
    "TaskState",
    "TaskStatus",
    "UpdateParams",
    "bounded_status_message",
    "check_create_task_result",
    "check_legacy_create_task_result",
    "declares_tasks",
    "format_timestamp",
    "may_return_task",
    "missing_tasks_capability",
    "parse_task_id",
    "parse_task_state",
    "parse_update_params",
    "poll_delay",
    "refuse_legacy_tasks",
    "status_notification",
    "task_not_found",
    "without_tasks_extension",
]

#: The extension's identifier: the key under ``capabilities.extensions`` on both sides.
TASKS_EXTENSION: Final = "io.modelcontextprotocol/tasks"
#: ``resultType`` of a ``CreateTaskResult`` (reserved for this extension).
RESULT_TYPE_TASK: Final = "task"

TASKS_GET: Final = "tasks/get"
TASKS_UPDATE: Final = "tasks/update"
TASKS_CANCEL: Final = "tasks/cancel"
#: The status notification, delivered on ``subscriptions/listen`` streams whose filter names
#: the task in ``taskIds`` ("Task Status Notifications").
TASKS_NOTIFICATION: Final = "notifications/tasks"
#: The requests a server may answer with a ``CreateTaskResult`` ("Supported Methods").
TASK_SUPPORTED_METHODS: Final = frozenset({"tools/call"})
#: Streamable HTTP: the body field each task method's ``Mcp-Name`` header mirrors
#: ("Streamable HTTP: Routing Headers").
NAME_KEYS: Final = {TASKS_GET: "taskId", TASKS_UPDATE: "taskId", TASKS_CANCEL: "taskId"}

TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
"""A task's status ("Task Status")."""

#: The final statuses: once reached, a task never changes again.
TERMINAL_STATUSES: Final[frozenset[str]] = frozenset({"completed", "failed", "cancelled"})

#: Which status may follow which (the spec's state diagram). Staying in a non-terminal
#: status is allowed: it is how the status message changes.
TRANSITIONS: Final[Mapping[str, frozenset[str]]] = {
    "working": frozenset({"working", "input_required", "completed", "failed", "cancelled"}),
    "input_required": frozenset({"working", "input_required", "completed", "failed", "cancelled"}),
    "completed": frozenset(),
    "failed": frozenset(),
    "cancelled": frozenset(),
}

_REQUIRED_CREATE_FIELDS: Final = ("taskId", "status", "createdAt", "lastUpdatedAt", "ttlMs")


def declares_tasks(client_capabilities: Mapping[str, Any] | None) -> bool:
    """Whether a request's ``clientCapabilities`` declare the tasks extension (as an
    object: :func:`~mcp_sansio._versions.declares_extension`, the rule for every one)."""
    return declares_extension(client_capabilities, TASKS_EXTENSION)


def may_return_task(method: str, client_capabilities: Mapping[str, Any] | None) -> bool:
    """Whether a server may answer this request with a ``CreateTaskResult``: a supported
    method, from a client that declared the extension on the request itself."""
    return method in TASK_SUPPORTED_METHODS and declares_tasks(client_capabilities)


def missing_tasks_capability(what: str = "This request") -> ErrorData:
    """The -32021 error for a client that did not declare the extension: for the ``tasks/*``
    methods, and for a tool that can only run as a task ("Capability Negotiation")."""
    return ErrorData(
        code=ErrorCode.MISSING_REQUIRED_CLIENT_CAPABILITY,
        message=f"{what} requires the client capability extensions[{TASKS_EXTENSION!r}]",
        data={"requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}},
    )


def task_not_found(task_id: str) -> ErrorData:
    """-32602 for a task id the server does not know (never issued, or purged after its
    TTL): "Error Handling", which allows a purged task to look unknown."""
    return ErrorData(
        code=ErrorCode.INVALID_PARAMS,
        message="Failed to retrieve task: Task not found",
        data={"taskId": task_id},
    )


def without_tasks_extension(capabilities: Mapping[str, Any]) -> Mapping[str, Any]:
    """``capabilities`` without the tasks extension, for a legacy ``initialize`` result:
    the extension is a modern-era one, and a legacy session cannot use it."""
    extensions = capabilities.get("extensions")
    if not isinstance(extensions, Mapping) or TASKS_EXTENSION not in extensions:
        return capabilities
    rest = {k: v for k, v in extensions.items() if k != TASKS_EXTENSION}
    out = {k: v for k, v in capabilities.items() if k != "extensions"}
    if rest:
        out["extensions"] = rest
    return out


def refuse_legacy_tasks(capabilities: Mapping[str, Any]) -> None:
    """For a binding that implements tasks only as this (modern) extension: refuse
    ``capabilities`` holding a top-level ``tasks`` -- the 2025-11-25 capability, which
    would promise task-augmented requests, ``tasks/list`` and ``tasks/cancel`` the
    binding never serves (the 2026-07-28 capabilities have no such key at all). The core
    itself lets it through: an application on the bare core may serve those tasks.

    Raises:
        ValueError: there is one.
    """
    if "tasks" in capabilities:
        raise ValueError(
            "capabilities['tasks'] (the 2025-11-25 tasks) is not supported: tasks are"
            f" served as the modern extension only (capabilities={{'extensions':"
            f" {{{TASKS_EXTENSION!r}: {{}}}}}})"
        )


def format_timestamp(now: float) -> str:
    """``now`` (seconds since the epoch) as ISO 8601 in UTC with milliseconds, e.g.
    ``2025-11-25T10:30:00.000Z``."""
    moment = datetime.datetime.fromtimestamp(now, tz=datetime.UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


#: What ends a status message cut to its bound (U+2026, three bytes in UTF-8).
_ELLIPSIS: Final = "\u2026"
#: A surrogate code point: alone in a ``str`` (``os.fsdecode`` of a name that is not UTF-8,
#: say) it has no UTF-8 encoding, so no JSON text can carry it.
_SURROGATE: Final = "[\ud800-\udfff]"  # (compiled by re on first use: a rare path)


def bounded_status_message(message: str, max_bytes: int) -> str:
    """``message`` made fit for a ``statusMessage`` of at most ``max_bytes`` (at least 3)
    of UTF-8: each lone surrogate replaced by U+FFFD (else the task's ``tasks/get`` could
    not be encoded); then, if it is still too long, its longest prefix that fits with an
    ellipsis (``\u2026``) after it, cut between two characters, never inside one. The
    work is bounded by ``max_bytes``, not by the length of ``message``."""
    if message.isascii():  # (one byte a character, no surrogate: the common case)
        if len(message) <= max_bytes:
            return message
        return message[: max_bytes - len(_ELLIPSIS.encode())] + _ELLIPSIS
    # Each character takes one byte at least: the first max_bytes + 1 decide and are
    # enough to cut from.
    head = message[: max_bytes + 1]
    try:
        encoded = head.encode()
    except UnicodeEncodeError:
        head = re.sub(_SURROGATE, "\ufffd", head)
        encoded = head.encode()
    if len(encoded) <= max_bytes:
        return head  # (then head is all of message: max_bytes + 1 characters would not fit)
    # The cut may split the last character: "ignore" drops its first bytes.
    kept = encoded[: max_bytes - len(_ELLIPSIS.encode())].decode("utf-8", "ignore")
    return kept + _ELLIPSIS


def _check_duration(name: str, value: object, *, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise LocalProtocolError(f"{name} must be a positive integer (milliseconds), not {value!r}")


@final
@attrs.frozen(kw_only=True)
class Task:
    """One task's record: what ``tasks/get`` reports about it, minus the payload.

    Change it only with :meth:`moved_to` (or :meth:`with_message`), which enforce
    :data:`TRANSITIONS`.
    """

    task_id: str
    """The server-generated id (unguessable: it is the only key to the task)."""
    status: TaskStatus
    """The current status."""
    created_at: float
    """When it was created, in seconds since the epoch (wall clock)."""
    last_updated_at: float
    """When its status or message last changed, in seconds since the epoch."""
    ttl_ms: int | None
    """How long after creation the server keeps it, in ms; ``None`` for unlimited."""
    poll_interval_ms: int | None = None
    """The polling interval the server suggests, in ms."""
    status_message: str | None = None
    """A human-readable word on the current status."""

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.task_id, str) or not self.task_id:
            raise LocalProtocolError("a task id is a non-empty string")
        if self.status not in TRANSITIONS:
            raise LocalProtocolError(f"unknown task status {self.status!r}")
        _check_duration("ttlMs", self.ttl_ms, allow_none=True)
        _check_duration("pollIntervalMs", self.poll_interval_ms, allow_none=True)

    @classmethod
    def created(
        cls,
        task_id: str,
        *,
        now: float,
        ttl_ms: int | None,
        poll_interval_ms: int | None = None,
        status_message: str | None = None,
    ) -> Task:
        """A new task, ``working`` ("the seed state").

        Raises:
            LocalProtocolError: an empty id, or a duration that is not a positive integer.
        """
        return cls(
            task_id=task_id,
            status="working",
            created_at=now,
            last_updated_at=now,
            ttl_ms=ttl_ms,
            poll_interval_ms=poll_interval_ms,
            status_message=status_message,
        )

    @property
    def terminal(self) -> bool:
        """Whether the status is final."""
        return self.status in TERMINAL_STATUSES

    def moved_to(self, status: TaskStatus, *, now: float, message: str | None = None) -> Task:
        """The task in ``status`` (with ``message``, or none), updated at ``now``.

        Raises:
            LocalProtocolError: :data:`TRANSITIONS` forbids it (a terminal task never
                changes). Nothing changed.
        """
        if status not in TRANSITIONS.get(self.status, ()):
            raise LocalProtocolError(f"a task cannot go from {self.status!r} to {status!r}")
        return attrs.evolve(self, status=status, last_updated_at=now, status_message=message)

    def with_message(self, message: str | None, *, now: float) -> Task:
        """The task with a new status message (its status unchanged).

        Raises:
            LocalProtocolError: the task is terminal.
        """
        return self.moved_to(self.status, now=now, message=message)

    def to_wire(self) -> dict[str, Any]:
        """The ``Task`` object: ``taskId``, ``status``, timestamps, ``ttlMs`` (``null``
        when unlimited), ``pollIntervalMs`` and ``statusMessage`` when set."""
        out: dict[str, Any] = {
            "taskId": self.task_id,
            "status": self.status,
            "createdAt": format_timestamp(self.created_at),
            "lastUpdatedAt": format_timestamp(self.last_updated_at),
            "ttlMs": self.ttl_ms,
        }
        if self.poll_interval_ms is not None:
            out["pollIntervalMs"] = self.poll_interval_ms
        if self.status_message is not None:
            out["statusMessage"] = self.status_message
        return out

    def create_result(self) -> dict[str, Any]:
        """The ``CreateTaskResult``: the task, flat, with ``resultType: "task"``."""
        return {"resultType": RESULT_TYPE_TASK, **self.to_wire()}

    def detailed(
        self,
        *,
        result: Mapping[str, Any] | bytes | None = None,
        error: ErrorData | None = None,
        input_requests: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The ``tasks/get`` result (a ``DetailedTask``): the task plus the one payload its
        status calls for, and ``resultType: "complete"``.

        Args:
            result: the original request's result (``completed``): the object, or its
                JSON encoding (``bytes``, as a server that keeps results encoded stores
                them), embedded as it is when the answer is encoded: never encoded twice.
            error: the JSON-RPC error it failed with (``failed``).
            input_requests: the outstanding requests, by key (``input_required``).

        Raises:
            LocalProtocolError: the payload does not fit the status (a completed task
                without a result, a result on a working task, ...).
        """
        status = self.status
        if (result is not None) != (status == "completed"):
            raise LocalProtocolError(
                f"a {status} task {'needs' if result is None else 'has no'} result"
            )
        if (error is not None) != (status == "failed"):
            raise LocalProtocolError(
                f"a {status} task {'needs' if error is None else 'has no'} error"
            )
        if (input_requests is not None) != (status == "input_required"):
            raise LocalProtocolError(
                f"a {status} task {'needs' if input_requests is None else 'has no'} inputRequests"
            )
        out = {"resultType": "complete", **self.to_wire()}
        if isinstance(result, bytes):
            out["result"] = Fragment(result)
        elif result is not None:
            out["result"] = dict(result)
        elif error is not None:
            wire: dict[str, Any] = {"code": error.code, "message": error.message}
            if error.data is not None:
                wire["data"] = error.data
            out["error"] = wire
        elif input_requests is not None:
            out["inputRequests"] = dict(input_requests)
        return out


def check_create_task_result(result: Mapping[str, Any]) -> None:
    """Check a ``CreateTaskResult`` before it goes on the wire.

    Raises:
        LocalProtocolError: ``resultType`` is not ``"task"``, a required ``Task`` member is
            missing, the ``taskId`` is not a non-empty string, the status not a known one,
            ``createdAt`` or ``lastUpdatedAt`` not a string, ``ttlMs`` not a non-negative
            number or null, a ``statusMessage`` not a string or a ``pollIntervalMs`` not a
            non-negative number (what a client refuses to read: :func:`parse_task_state`),
            or it carries a payload that belongs on ``tasks/get`` (``result``, ``error``,
            ``inputRequests``) or MRTR's ``requestState``.
    """
    if result.get("resultType") != RESULT_TYPE_TASK:
        raise LocalProtocolError("a CreateTaskResult has resultType 'task'")
    missing = [name for name in _REQUIRED_CREATE_FIELDS if name not in result]
    if missing:
        raise LocalProtocolError(f"a CreateTaskResult needs {', '.join(missing)}")
    # What a client refuses to read is not sent: the Task's members are checked by the
    # client's own reading, so that the two agree by construction.
    state = parse_task_state(result, detailed=False)
    if isinstance(state, ErrorData):
        raise LocalProtocolError(f"a CreateTaskResult a client would refuse: {state.message}")
    extra = sorted({"result", "error", "inputRequests", "requestState"}.intersection(result))
    if extra:
        raise LocalProtocolError(f"a CreateTaskResult carries no {', '.join(extra)}")


def check_legacy_create_task_result(result: Mapping[str, Any]) -> None:
    """Check a 2025-11-25 ``CreateTaskResult`` (``{"task": Task}``) before it goes on the wire.

    The answer to a task-augmented request of that revision's tasks (a legacy-era feature,
    which the core lets an application on the bare core serve): tasks.mdx, "Receivers that
    accept a task-augmented request MUST return a CreateTaskResult".

    Raises:
        LocalProtocolError: ``task`` is not an object with a string ``taskId``,
            ``createdAt`` and ``lastUpdatedAt``, a known ``status`` and a ``ttl`` (an
            integer, or null for unlimited), the schema's required members; or its
            optional ``pollInterval`` is not an integer, or ``statusMessage`` not a string
            (the schema's ``Task``).
    """
    task = result.get("task")
    if (
        not isinstance(task, Mapping)
        or not all(isinstance(task.get(k), str) for k in ("taskId", "createdAt", "lastUpdatedAt"))
        or not isinstance(task.get("status"), str)
        or task["status"] not in TRANSITIONS
        or "ttl" not in task
        or not (task["ttl"] is None or type(task["ttl"]) is int)
    ):
        raise LocalProtocolError(
            "a CreateTaskResult's task needs a string taskId, createdAt and lastUpdatedAt,"
            " a known status and a ttl (an integer or null)"
        )
    if ("pollInterval" in task and type(task["pollInterval"]) is not int) or (
        "statusMessage" in task and not isinstance(task["statusMessage"], str)
    ):
        raise LocalProtocolError(
            "a CreateTaskResult's task has a pollInterval only as an integer, and a"
            " statusMessage only as a string"
        )


def parse_task_id(params: Any) -> str | ErrorData:
    """The ``taskId`` of ``tasks/get`` or ``tasks/cancel`` params, or the -32602 to answer."""
    task_id = params.get("taskId") if isinstance(params, Mapping) else None
    if not isinstance(task_id, str) or not task_id:
        return ErrorData(
            code=ErrorCode.INVALID_PARAMS, message="Invalid params: taskId must be a string"
        )
    return task_id


@final
@attrs.frozen(kw_only=True)
class UpdateParams:
    """The params of a ``tasks/update``."""

    task_id: str
    """The task to update."""
    input_responses: dict[str, Any]
    """Responses to outstanding ``inputRequests``, by key."""


def parse_update_params(params: Any) -> UpdateParams | ErrorData:
    """The params of a ``tasks/update``, or the -32602 to answer (``inputResponses`` must be
    an object; keys that are not outstanding are the server's to ignore, not an error)."""
    task_id = parse_task_id(params)
    if isinstance(task_id, ErrorData):
        return task_id
    responses = params.get("inputResponses")
    if not isinstance(responses, Mapping):
        return ErrorData(
            code=ErrorCode.INVALID_PARAMS,
            message="Invalid params: tasks/update needs inputResponses (an object)",
        )
    return UpdateParams(task_id=task_id, input_responses=dict(responses))


def status_notification(detailed: Mapping[str, Any]) -> dict[str, Any]:
    """The params of a ``notifications/tasks``: the ``DetailedTask`` that ``tasks/get``
    would return at that moment, without the result discriminator ``resultType``
    ("Task Status Notifications": each carries the complete task state)."""
    return {k: v for k, v in detailed.items() if k != "resultType"}


# ---------------------------------------------------------------- the client's side

#: The shortest wait between two ``tasks/get`` of one task, in ms, whatever the server
#: suggests: a hostile or careless ``pollIntervalMs: 1`` must not make us spin.
MIN_POLL_INTERVAL_MS: Final = 100
#: The longest: a server suggesting an hour still gets looked at now and then.
MAX_POLL_INTERVAL_MS: Final = 60_000
#: What we wait when the server suggests nothing.
DEFAULT_POLL_INTERVAL_MS: Final = 1_000


def poll_delay(
    poll_interval_ms: int | None,
    *,
    minimum_ms: int = MIN_POLL_INTERVAL_MS,
    maximum_ms: int = MAX_POLL_INTERVAL_MS,
) -> float:
    """How long to wait before the next ``tasks/get``, in seconds: the server's
    ``pollIntervalMs`` (which clients SHOULD honor, "Task Polling"), clamped to
    ``[minimum_ms, maximum_ms]``; :data:`DEFAULT_POLL_INTERVAL_MS` when it gave none."""
    wanted = DEFAULT_POLL_INTERVAL_MS if poll_interval_ms is None else poll_interval_ms
    return min(max(wanted, minimum_ms), maximum_ms) / 1000


@final
@attrs.frozen(kw_only=True)
class TaskState:
    """A task as the server reported it (``CreateTaskResult``, ``tasks/get`` or
    ``notifications/tasks``), checked: read with :func:`parse_task_state`."""

    task_id: str
    """The task's id."""
    status: TaskStatus
    """Its status."""
    status_message: str | None
    """The server's word on it, if any."""
    created_at: str
    """ISO 8601, as sent."""
    last_updated_at: str
    """ISO 8601, as sent."""
    ttl_ms: int | None
    """How long after creation the server keeps it (``None``: unlimited)."""
    poll_interval_ms: int | None
    """The polling interval the server suggests."""
    result: dict[str, Any] | None = None
    """``completed``: what the original request returned."""
    error: ErrorData | None = None
    """``failed``: the JSON-RPC error it failed with."""
    input_requests: dict[str, dict[str, Any]] | None = None
    """``input_required``: the outstanding requests, by key."""

    @property
    def terminal(self) -> bool:
        """Whether the status is final."""
        return self.status in TERMINAL_STATUSES


def _bad(message: str) -> ErrorData:
    return ErrorData(
        code=ErrorCode.INTERNAL_ERROR, message=f"Invalid task from the server: {message}"
    )


def _duration(obj: Mapping[str, Any], name: str, *, nullable: bool) -> int | ErrorData | None:
    """``obj[name]``, milliseconds: a JSON number, non-negative and finite. The
    extension's schema types it ``number`` and its prose says "integer milliseconds":
    ``60000.0`` is that integer (JSON Schema counts any number with a zero fraction as
    one), and a fraction is rounded up (a poll no sooner, a TTL no shorter, than asked)."""
    value = obj.get(name)
    if value is None and (nullable or name not in obj):
        return None
    if isinstance(value, float) and math.isfinite(value) and value >= 0:
        return math.ceil(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return _bad(f"{name} must be a non-negative number of milliseconds")
    return value


def parse_task_state(
    obj: Any, *, expected_id: str | None = None, detailed: bool = True
) -> TaskState | ErrorData:
    """Read a task the server sent (client side), or the error to raise for it.

    Args:
        obj: a ``CreateTaskResult``, a ``tasks/get`` result or ``notifications/tasks``
            params.
        expected_id: the task it must be about.
        detailed: whether the status's payload must be there (``tasks/get`` and
            notifications); a ``CreateTaskResult`` carries none.

    Returns:
        The :class:`TaskState`, or -32603 :class:`ErrorData` naming what is wrong: not an
        object, no or another ``taskId``, an unknown ``status``, bad timestamps or
        durations, or (``detailed``) a ``completed`` task without an object ``result``, a
        ``failed`` one without a JSON-RPC ``error``, an ``input_required`` one without an
        ``inputRequests`` object of requests.
    """
    if not isinstance(obj, Mapping):
        return _bad("not an object")
    task_id = obj.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        return _bad("taskId must be a non-empty string")
    if expected_id is not None and task_id != expected_id:
        return _bad(f"expected task {expected_id!r}, got {task_id!r}")
    status = obj.get("status")
    if not isinstance(status, str) or status not in TRANSITIONS:
        return _bad(f"unknown status {status!r}")
    created, updated = obj.get("createdAt"), obj.get("lastUpdatedAt")
    if not isinstance(created, str) or not isinstance(updated, str):
        return _bad("createdAt and lastUpdatedAt must be strings")
    message = obj.get("statusMessage")
    if message is not None and not isinstance(message, str):
        return _bad("statusMessage must be a string")
    ttl = _duration(obj, "ttlMs", nullable=True)
    poll = _duration(obj, "pollIntervalMs", nullable=False)
    for value in (ttl, poll):
        if isinstance(value, ErrorData):
            return value
    assert not isinstance(ttl, ErrorData) and not isinstance(poll, ErrorData)
    result = error = requests = None
    if detailed and status == "completed":
        result = obj.get("result")
        if not isinstance(result, Mapping):
            return _bad("a completed task needs a result object")
        result = dict(result)
    elif detailed and status == "failed":
        raw = obj.get("error")
        if (
            not isinstance(raw, Mapping)
            or isinstance(raw.get("code"), bool)
            or not isinstance(raw.get("code"), int)
            or not isinstance(raw.get("message"), str)
        ):
            return _bad("a failed task needs a JSON-RPC error (code and message)")
        error = ErrorData(code=raw["code"], message=raw["message"], data=raw.get("data"))
    elif detailed and status == "input_required":
        raw = obj.get("inputRequests")
        if not isinstance(raw, Mapping) or not all(
            isinstance(r, Mapping) and isinstance(r.get("method"), str) for r in raw.values()
        ):
            return _bad("an input_required task needs inputRequests, requests by key")
        requests = {str(k): dict(v) for k, v in raw.items()}
    return TaskState(
        task_id=task_id,
        status=status,  # type: ignore[arg-type]  # (checked against TRANSITIONS)
        status_message=message,
        created_at=created,
        last_updated_at=updated,
        ttl_ms=ttl,
        poll_interval_ms=poll,
        result=result,
        error=error,
        input_requests=requests,
    )
