# The ORM suite's SQLAlchemy part (Debian's python3-sqlalchemy 1.4,
# psycopg2). Prints "name=value" lines; 001_orm.pl asserts them.
import os

from sqlalchemy import BigInteger, Column, Text, create_engine, exc
from sqlalchemy.orm import Session, declarative_base

Base = declarative_base()


class User(Base):
    __tablename__ = 'users'
    id = Column(BigInteger, primary_key=True)
    username = Column(Text)


class Key(Base):
    __tablename__ = 'keys'
    id = Column(BigInteger, primary_key=True)
    fingerprint = Column(Text)


def engine(db):
    return create_engine('postgresql+psycopg2://%s@/%s?host=%s&port=%s' % (
        os.environ.get('ORM_USER', ''), db, os.environ['ORM_HOST'], os.environ['ORM_PORT']))


def out(name, value):
    print('%s=%s' % (name, value), flush=True)


def name_of(e):
    return '%s/%s' % (type(e).__name__, getattr(e.orig, 'pgcode', None))


e1 = engine('cell1')
e2 = engine('cell2')

# Immediate: the error comes at flush (the statement); a nested
# transaction (savepoint) recovers and the session commits the rest.
with Session(e1) as s:
    try:
        with s.begin_nested():
            s.add(User(username='taken'))
        out('flush_error', 'none')
    except exc.DBAPIError as e:
        out('flush_error', name_of(e))
    s.add(User(username='sa_after'))
    try:
        s.commit()
        out('commit', 'ok')
    except exc.DBAPIError as e:
        out('commit', name_of(e))

# Deferred: flush succeeds, the error comes at commit.
with Session(e1) as s:
    s.add(Key(fingerprint='ktaken'))
    s.flush()
    out('deferred_flush', 'ok')
    try:
        s.commit()
        out('deferred_commit', 'ok')
    except exc.DBAPIError as e:
        out('deferred_commit', name_of(e))

# 55P03: a value under another cell's open transaction's lease.
c2 = e2.connect()
t2 = c2.begin()
c2.exec_driver_sql("INSERT INTO users (username) VALUES ('sa_held')")
with Session(e1) as s:
    try:
        s.add(User(username='sa_held'))
        s.flush()
        out('held', 'none')
    except exc.DBAPIError as e:
        out('held', name_of(e))
t2.rollback()
c2.close()
