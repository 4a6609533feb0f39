"""Where a tenant's `files` sources and sinks may point: under its own root, `<filesRoot>/<namespace>`
(pure: paths in, a path or one sentence out). A relative path lies under the tenant's root; an
absolute one must already; `..` cannot climb out and no other filesystem (s3a, hdfs, ...) is
reachable. The pool runtime also resolves symbolic links before it starts a query (`sluice.runtime.host`)."""

from __future__ import annotations

import posixpath
import re

from .common import shown
from .query import FilesSink, FilesSource, StreamingQuery

DEFAULT_FILES_ROOT = "/var/lib/sluice/files"
"""A pool's files root unless its spec sets one."""
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


class FilesOutsideRoot(ValueError):
    """A path outside the tenant's root; the message is one sentence."""


def tenant_root(root: str, namespace: str) -> str:
    return posixpath.join(posixpath.normpath(root), namespace)


def confine(path: str, namespace: str, root: str) -> str:
    """The absolute, normalized path `path` means for `namespace` on a pool whose files root is
    `root`; FilesOutsideRoot if it reaches outside `<root>/<namespace>`."""
    own = tenant_root(root, namespace)
    scheme = _SCHEME.match(path)
    local = path
    if scheme is not None:
        if scheme.group(1).lower() != "file":
            raise FilesOutsideRoot(f"'{shown(path)}' names the {scheme.group(1)} filesystem, which pools do not "
                                   f"reach; write a path under {own}")
        local = "/" + path[len(scheme.group(0)):].lstrip("/")
    resolved = posixpath.normpath(posixpath.join(own, local))  # an absolute `local` replaces `own`
    if resolved != own and not resolved.startswith(own + "/"):
        raise FilesOutsideRoot(f"'{shown(path)}' is outside the files root of namespace '{namespace}' ({own}); "
                               f"write a path under it")
    return resolved


def confine_query(query: StreamingQuery, root: str) -> StreamingQuery:
    """The query with its `files` source and sink paths confined and resolved (FilesOutsideRoot
    names the field: `spec.source.path: ...`)."""
    spec = query.spec
    update = {}
    for field, part in (("source", spec.source), ("sink", spec.sink)):
        if isinstance(part, FilesSource | FilesSink):
            try:
                update[field] = part.model_copy(update={"path": confine(part.path, query.tenant, root)})
            except FilesOutsideRoot as outside:
                raise FilesOutsideRoot(f"spec.{field}.path: {outside}") from None
    return query if not update else query.model_copy(update={"spec": spec.model_copy(update=update)})
