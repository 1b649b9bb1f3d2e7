"""Which process holds which TCP connection, from Linux's /proc: the kernel's own account.

Tests of ``--num_workers`` show which worker answered a client without the server saying
anything to clients: a client's connection (its local port) is matched with the server end of
the same connection in ``/proc/net/tcp{,6}`` and that socket's inode with a process's open
files (``/proc/<pid>/fd``).
"""

from __future__ import annotations

import os
from pathlib import Path

ESTABLISHED = "01"


def _tcp_table() -> list[tuple[int, int, str, int]]:
    """(local port, remote port, state, inode) of every TCP socket in this network namespace."""
    rows = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], int(fields[9])
            rows.append((int(local.rsplit(":", 1)[1], 16), int(remote.rsplit(":", 1)[1], 16), state, inode))
    return rows


def socket_inodes(pid: int | str) -> set[int]:
    """Inodes of the sockets process ``pid`` has open (empty when it is gone)."""
    inodes = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def own_connections(server_port: int) -> set[int]:
    """Local ports of this process's established connections to ``server_port``."""
    mine = socket_inodes("self")
    return {
        local
        for local, remote, state, inode in _tcp_table()
        if remote == server_port and state == ESTABLISHED and inode in mine
    }


def connection_owners(server_port: int, client_ports: list[int], pids: list[int]) -> dict[int, int | None]:
    """For each client port, the pid among ``pids`` holding the server end of its connection
    to ``server_port`` (None: no such process holds it)."""
    owner_of_inode = {inode: pid for pid in pids for inode in socket_inodes(pid)}
    server_ends = {
        remote: inode
        for local, remote, state, inode in _tcp_table()
        if local == server_port and state == ESTABLISHED
    }
    return {port: owner_of_inode.get(server_ends.get(port, -1)) for port in client_ports}


def children(pid: int) -> list[int]:
    """The pids whose parent is ``pid``, alive or not yet reaped."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(name))
    return sorted(found)


def is_dead(pid: int) -> bool:
    """True once ``pid`` has exited (gone, or a zombie not yet reaped: its sockets are closed)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")
