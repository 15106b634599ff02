"""lockgate's fencing token enforced in the application's OWN table (docs/fencing-sql.md), on a
real PostgreSQL (psycopg 3) and a real MariaDB (PyMySQL) from the project's launcher: a holder
paused past its lease writes late with its old token and the database refuses it (0 rows: "you
lost the lock, stop"), while the next holder's writes land.

The fenced write is ``UPDATE account SET ..., fence = <token> WHERE id = <id> AND fence <=
<token>``; the next holder claims the row (the same UPDATE setting only ``fence``) before it
reads it, so every older holder is cut off from its grant on."""

from __future__ import annotations

import os
import time
from typing import Any, Iterator
from urllib.parse import unquote, urlsplit

import psycopg
import pymysql
import pytest
from pymysql.constants import CLIENT

import lockgate
from conftest import Deployment

# A fixed (not renewed) lease: a paused process renews nothing either.
PAUSED_LEASE = 1.0


def unique(tag: str) -> str:
    return f"fence-{tag}-{os.getpid()}-{time.monotonic_ns()}"


class Account:
    """The application's table `account` (id, balance, fence) on its own connection."""

    def __init__(self, kind: str, url: str) -> None:
        self.kind = kind
        if kind == "postgres":
            self.conn: Any = psycopg.connect(url, autocommit=True)
            ddl = "CREATE TABLE account (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, fence BIGINT NOT NULL DEFAULT 0)"
        else:
            self.conn = mysql_connect(url, client_flag=CLIENT.FOUND_ROWS)
            ddl = "CREATE TABLE account (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL, fence BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB"
        self.run(ddl)
        self.run("INSERT INTO account (id, balance) VALUES (1, 100)")

    def run(self, sql: str, *args: Any) -> int:
        with self.conn.cursor() as cur:
            cur.execute(sql, args or None)
            return int(cur.rowcount)

    def write(self, account: int, balance: int, fence: int) -> int:
        """The fenced write: 1 row if this token is still the newest, 0 if a later holder wrote."""
        return self.run("UPDATE account SET balance = %s, fence = %s WHERE id = %s AND fence <= %s", balance, fence, account, fence)

    def claim(self, account: int, fence: int) -> int:
        """A new holder's first statement, before it reads the row: cuts off every older holder."""
        return self.run("UPDATE account SET fence = %s WHERE id = %s AND fence <= %s", fence, account, fence)

    def row(self, account: int) -> tuple[int, int]:
        with self.conn.cursor() as cur:
            cur.execute("SELECT balance, fence FROM account WHERE id = %s", (account,))
            balance, fence = cur.fetchone()
            return int(balance), int(fence)

    def close(self) -> None:
        self.conn.close()


def mysql_connect(url: str, **kw: Any) -> Any:
    u = urlsplit(url)
    return pymysql.connect(host=u.hostname, port=u.port, user=unquote(u.username or ""), password=unquote(u.password or ""),
                           database=u.path.lstrip("/"), autocommit=True, **kw)


@pytest.fixture(scope="module", params=["postgres", "mariadb"])
def db(request: Any) -> Iterator[Deployment]:
    d = Deployment(request.param)
    try:
        yield d
    finally:
        d.close()


@pytest.fixture
def account(db: Deployment) -> Iterator[Account]:
    a = Account(str(db.info["kind"]), db.url)
    try:
        yield a
    finally:
        a.run("DROP TABLE account")  # the test's own table, not lockgate's
        a.close()


def test_a_paused_holders_late_write_is_refused(db: Deployment, account: Account) -> None:
    name = unique("account-1")
    with lockgate.Client(db.url, response_timeout=2) as a, lockgate.Client(db.url, response_timeout=2) as b:
        first = a.lock(name, PAUSED_LEASE, renew=False).acquire(timeout=10)
        old = first.fencing_token
        assert old is not None
        assert account.write(1, 110, old) == 1, "the holder's write lands"
        assert account.write(1, 110, old) == 1, "and again with the same token and value (a retry)"
        assert account.write(1, 120, old) == 1, "and again with a new value"

        # A pauses past its lease; B, waiting meanwhile, is granted when A's lease is over.
        second = b.lock(name).acquire(timeout=10)
        new = second.fencing_token
        assert new is not None and new > old, (new, old)
        assert not first.is_held
        assert account.claim(1, new) == 1, "B claims the row before reading it"

        # A wakes up and finishes its work: refused, the row is B's.
        assert account.write(1, 999, old) == 0, "the late write of the old token changes nothing"
        assert account.row(1) == (120, new)
        assert account.write(1, 200, new) == 1, "B's write lands"
        assert account.write(1, 999, old) == 0
        assert account.row(1) == (200, new)
        second.release()


@pytest.mark.parametrize("db", ["mariadb"], indirect=True)
def test_pymysql_counts_changed_rows_without_found_rows(db: Deployment, account: Account) -> None:
    """Why the MariaDB connection above sets CLIENT.FOUND_ROWS: without it PyMySQL (like
    mysqlclient) reports rows CHANGED, so a holder rewriting the same value with its own token
    would read 0 and think it lost the lock."""
    assert account.write(1, 150, 7) == 1
    plain = mysql_connect(db.url)
    try:
        with plain.cursor() as cur:
            cur.execute("UPDATE account SET balance = %s, fence = %s WHERE id = %s AND fence <= %s", (150, 7, 1, 7))
            assert cur.rowcount == 0, "matched but unchanged: 0 without FOUND_ROWS"
    finally:
        plain.close()
    assert account.write(1, 150, 7) == 1, "1 with FOUND_ROWS: matched"

