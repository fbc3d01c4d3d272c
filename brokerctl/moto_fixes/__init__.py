"""What local mode changes in moto, one module per moto behaviour it works around, each naming the
behaviour (and moto's issue where one is filed). They fix what local users would otherwise see
(a message stolen by moto's own Lambda poller, archive objects in the wrong folder, a lost
delete, two winners of one conditional write) or what many triggers would cost (every attribute
of a queue built on every send, 1,000 idle long polls waking every second, a TCP connection per
call). Nothing here makes moto answer a single request faster.

They replace moto internals, so they are written against one moto version, ``PINNED_MOTO``
(requirements-dev.txt pins it): the endpoint refuses to start on another one rather than patch
what it does not know.
"""

from __future__ import annotations

import importlib.metadata

from brokerctl.moto_fixes.dynamodb_writes import atomic_writes
from brokerctl.moto_fixes.firehose_prefixes import render_timestamp_prefixes
from brokerctl.moto_fixes.keep_alive import keep_alive_handler
from brokerctl.moto_fixes.lambda_invocation import disable_lambda_invocation
from brokerctl.moto_fixes.sqs_deletes import lock_deletes
from brokerctl.moto_fixes.sqs_long_polls import quiet_idle_long_polls
from brokerctl.moto_fixes.sqs_queue_attributes import compute_on_demand

PINNED_MOTO = "5.2.5"

__all__ = ["PINNED_MOTO", "MotoVersionError", "apply", "keep_alive_handler", "require_pinned_moto"]


class MotoVersionError(RuntimeError):
    """The installed moto is not the version these fixes are written against."""


def installed_moto() -> str:
    try:
        return importlib.metadata.version("moto")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def require_pinned_moto(installed: str) -> None:
    if installed != PINNED_MOTO:
        raise MotoVersionError(
            f"local mode's AWS endpoint needs moto {PINNED_MOTO}, found {installed}: its fixes "
            f"to moto (brokerctl/moto_fixes/) replace internals of that version only. Install "
            f"it with: pip install 'moto[server]=={PINNED_MOTO}' (as requirements-dev.txt pins "
            "it), or point AWS_ENDPOINT_URL at an emulator of your own"
        )


def apply() -> None:
    """Every fix, in this process (the endpoint's own), after checking moto's version."""
    require_pinned_moto(installed_moto())
    disable_lambda_invocation()
    render_timestamp_prefixes()
    lock_deletes()
    atomic_writes()
    compute_on_demand()
    quiet_idle_long_polls()
