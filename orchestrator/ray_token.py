"""The Ray token a search relies on stays private to its owner (mode 0600).

Ray 2.60 turns token authentication on for every new local Ray, and `ray.init` writes a new token
to `~/.ray/auth_token` when it finds none, with the default umask: 0644, readable by every local
user, and with it the right to run any code on the cluster. Where Ray looks for the token (its
C++ `AuthenticationTokenLoader`, and `authentication_token_setup` in Python): the token itself in
`RAY_AUTH_TOKEN`, else the file `RAY_AUTH_TOKEN_PATH` names, else `$HOME/.ray/auth_token`.
`RAY_AUTH_MODE=disabled` turns authentication off (then there is no token to protect).

`private_token` runs before Ray starts: it makes the default token itself, private, where Ray
would make one, and tightens a token file that is readable by others. `init_ray` calls it again
after Ray started, in case Ray wrote one after all.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

logger = logging.getLogger(__name__)

PRIVATE = 0o600


def token_path() -> Path | None:
    """The token file Ray reads, or None when Ray reads no file (the token is in the
    environment, or authentication is off)."""
    if os.environ.get("RAY_AUTH_MODE", "").lower() == "disabled" or \
            os.environ.get("RAY_AUTH_TOKEN"):
        return None
    named = os.environ.get("RAY_AUTH_TOKEN_PATH")
    if named:
        return Path(named).expanduser()
    return Path(os.environ.get("HOME") or Path.home()) / ".ray" / "auth_token"


def private_token(create: bool = True) -> Path | None:
    """Make sure the token file Ray will read is readable by its owner only.

    create: when the default token file is missing (Ray would write one, world-readable), write
    one with Ray's own generator, created 0600 in a 0700 folder. A file that
    RAY_AUTH_TOKEN_PATH names is never created (Ray refuses a missing one itself).
    Returns the token file, or None when Ray reads none. Never fails a search: a file it may
    not change is left as it is, with a warning."""
    path = token_path()
    if path is None:
        return None
    default = not os.environ.get("RAY_AUTH_TOKEN_PATH")
    if not path.exists():
        if create and default:
            _write_private(path)
        return path
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            path.chmod(PRIVATE)
    except OSError as err:
        logger.warning("the Ray token %s is readable by others and could not be made "
                       "private (%s): chmod 600 it", path, err)
    return path


def _write_private(path: Path) -> None:
    from ray._private.authentication.authentication_token_generator import (
        generate_new_authentication_token)

    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        # O_EXCL: a token another process wrote meanwhile is kept, never replaced.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE)
    except FileExistsError:
        return
    with os.fdopen(fd, "w") as f:
        f.write(generate_new_authentication_token())
