# The ORM suite's Django part (Debian's python3-django 3.2, psycopg2): a
# model on a claimed table of two cells, and what an application sees.
# Prints one "name=value" line per check; 001_orm.pl asserts them.
import os
import threading

import django
from django.conf import settings


def db(name):
    return {'ENGINE': 'django.db.backends.postgresql', 'NAME': name,
            'HOST': os.environ['ORM_HOST'], 'PORT': os.environ['ORM_PORT'],
            'USER': os.environ.get('ORM_USER', ''), 'ATOMIC_REQUESTS': False}


settings.configure(DATABASES={'default': db('cell1'), 'cell2': db('cell2'), 'copy': db('copy1')},
                   INSTALLED_APPS=[], USE_TZ=True,
                   DEFAULT_AUTO_FIELD='django.db.models.BigAutoField')
django.setup()

from django.core.management.color import no_style  # noqa: E402
from django.db import (DataError, IntegrityError, OperationalError, connections,  # noqa: E402
                       models, transaction)


class User(models.Model):
    username = models.TextField(null=True)

    class Meta:
        app_label = 'orm'
        db_table = 'users'
        managed = False


class Key(models.Model):
    fingerprint = models.TextField(null=True)

    class Meta:
        app_label = 'orm'
        db_table = 'keys'
        managed = False


def out(name, value):
    print('%s=%s' % (name, value), flush=True)


def error_of(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the class is what is checked
        code = getattr(getattr(e, '__cause__', None), 'pgcode', None)
        return '%s/%s' % (type(e).__name__, code)
    return 'none'


# 23505 at the statement: a savepoint catches it, the transaction goes on.
def savepoint():
    with transaction.atomic():
        try:
            with transaction.atomic():
                User.objects.create(username='taken')
            out('savepoint_error', 'none')
        except IntegrityError as e:
            out('savepoint_error', 'IntegrityError/' + e.__cause__.pgcode)
        User.objects.create(username='dj_after')


out('savepoint_commit', error_of(savepoint))
out('savepoint_kept', User.objects.filter(username='dj_after').count())


# get_or_create of a value another cell holds: immediate mode raises at
# the call (its savepoint rolled back), deferred mode creates and fails at COMMIT.
def goc_immediate():
    with transaction.atomic():
        User.objects.get_or_create(username='taken')


out('goc_immediate', error_of(goc_immediate))
created = []


def goc_deferred():
    with transaction.atomic():
        created.append(Key.objects.get_or_create(fingerprint='ktaken')[1])


out('goc_deferred', error_of(goc_deferred))
out('goc_deferred_created', created)

# bulk_create with one taken value: the statement fails, nothing is kept.
out('bulk_create', error_of(lambda: User.objects.bulk_create([User(username='dj_b1'), User(username='taken')])))
out('bulk_kept', User.objects.filter(username='dj_b1').count())
# a value longer than 1024 characters: DataError at the statement
out('too_long', error_of(lambda: User.objects.create(username='x' * 1025)))

# 55P03: a value under another cell's open transaction's lease.
out('held', error_of(lambda: User.objects.create(username='dj_held')))

# A cross-cell race of get_or_create for one value: one cell creates it,
# the other gets an exception; never both.
barrier = threading.Barrier(2)
results = {}


def racer(alias):
    try:
        barrier.wait(timeout=30)
        with transaction.atomic(using=alias):
            obj, was_created = User.objects.using(alias).get_or_create(username='dj_race')
        results[alias] = 'created' if was_created else 'found'
    except (IntegrityError, OperationalError) as e:
        results[alias] = type(e).__name__
    finally:
        connections[alias].close()


threads = [threading.Thread(target=racer, args=(a,)) for a in ('default', 'cell2')]
for t in threads:
    t.start()
for t in threads:
    t.join(60)
out('race', ','.join(sorted(results.values())))

# flush / TransactionTestCase teardown: the statements Django runs (TRUNCATE).
with connections['default'].cursor() as cur:
    for sql in connections['default'].ops.sql_flush(no_style(), ['users', 'keys']):
        cur.execute(sql)
out('flush_left', User.objects.count())

# A test database cloned from the cell refuses to claim (55000).
out('copy', error_of(lambda: User.objects.using('copy').create(username='dj_copy')))
