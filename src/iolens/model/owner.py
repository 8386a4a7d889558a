"""Who a job belongs to: account names, and the owner of a job known only by a uid number.

Users see the jobs whose `jobs.user` is their account name (`present.web.scope`). A job
imported from another machine's records (a Darshan log) carries the uid it ran under
there, a number that names someone else, or no one, here. Such a job is owned by
`uid:<N>` until the site's map names the account (`ingest.uid_map`): the colon is not
allowed in an account name (`USER_NAME`), so no login, by token, session or trusted
proxy header, ever matches it and only administrators see the job.
"""

from __future__ import annotations

import re

#: Account names: scheduler user names, no spaces, slashes or colons.
USER_NAME = re.compile(r"^[A-Za-z0-9._@+-]{1,64}$")


def unmapped_owner(uid: int) -> str:
    """The owner of a job known only by `uid`: never an account name."""
    return f"uid:{int(uid)}"


__all__ = ["USER_NAME", "unmapped_owner"]
