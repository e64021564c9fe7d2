"""The Terminal-Bench wrapper's action, observation and state (OpenEnv's `tbench2_env`
models), restated field for field on the installed openenv-core's base classes.

`openenv-core` does not ship `tbench2_env`; its models live in the OpenEnv repository
(envs/tbench2_env/models.py). These definitions give every field the wrapper's name, type and
default and docstring (pydantic makes the docstring the schema's description), so
`model_json_schema()` here is the schema the wrapper's own server answers on `/schema` (see
tbench2-schema.json, the copy the tests keep).
"""

from typing import Optional

from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field


class Tbench2Action(Action):
    """Action for interacting with a TB2 task session."""

    action_type: str = Field(default="exec")
    command: str = Field(default="")
    session_id: Optional[str] = Field(default=None)
    block: bool = Field(default=True)
    wait_seconds: Optional[float] = Field(default=None)
    file_path: str = Field(default="")
    content: str = Field(default="")


class Tbench2Observation(Observation):
    """Observation returned from the TB2 environment."""

    instruction: str = Field(default="")
    output: str = Field(default="")
    success: bool = Field(default=True)
    error: str = Field(default="")
    task_id: str = Field(default="")
    task_path: str = Field(default="")
    session_id: Optional[str] = Field(default=None)
    action_type: str = Field(default="")
    info: dict = Field(default_factory=dict)


class Tbench2State(State):
    """Server-side state for a TB2 task."""

    task_id: str = Field(default="")
    task_path: str = Field(default="")
    terminal_ready: bool = Field(default=False)
    last_action_type: str = Field(default="")
    last_command: str = Field(default="")
    last_output: str = Field(default="")


def wrapper_schema() -> dict:
    """What the wrapper's server answers on /schema (OpenEnv's http_server: the action and
    observation models, and the base State)."""
    return {
        "action": Tbench2Action.model_json_schema(),
        "observation": Tbench2Observation.model_json_schema(),
        "state": State.model_json_schema(),
    }
