# The ORM suite's ActiveRecord part (Debian's ruby-activerecord 6.1 and
# ruby-pg). Prints "name=value" lines; 001_orm.pl asserts them.
require 'active_record'

$stdout.sync = true
def conf(db)
  { adapter: 'postgresql', host: ENV['ORM_HOST'], port: ENV['ORM_PORT'], database: db,
    username: ENV['ORM_USER'] }
end

class Cell1 < ActiveRecord::Base
  self.abstract_class = true
  establish_connection conf('cell1')
end

class User < Cell1
  self.table_name = 'users'
end

class Key < Cell1
  self.table_name = 'keys'
end

class CopyUser < ActiveRecord::Base
  establish_connection conf('copy1')
  self.table_name = 'users'
end

def out(name, value)
  puts "#{name}=#{value}"
end

def error_of
  yield
  'none'
rescue StandardError => e
  "#{e.class.name}/#{e.cause.respond_to?(:result) && e.cause.result ? e.cause.result.error_field(PG::PG_DIAG_SQLSTATE) : ''}"
end

# 23505 at the statement: a savepoint (requires_new) rescues it.
User.transaction do
  begin
    User.transaction(requires_new: true) { User.create!(username: 'taken') }
    out('savepoint_error', 'none')
  rescue ActiveRecord::RecordNotUnique => e
    out('savepoint_error', e.class.name)
  end
  User.create!(username: 'ar_after')
end
out('savepoint_kept', User.where(username: 'ar_after').count)

# create_or_find_by of a value a row of this cell holds already (no unique
# index): the create fails at its statement in its savepoint, the find
# returns the existing row.
first = User.create!(username: 'ar_local')
found = User.create_or_find_by(username: 'ar_local')
out('create_or_find_by', found.id == first.id ? 'found existing' : "other #{found.id}")
# ... and of a value another cell holds: the create fails, nothing is found here.
out('create_or_find_by_other', error_of { User.create_or_find_by(username: 'taken') })

# insert_all with one taken value: the statement fails, nothing kept.
out('insert_all', error_of { User.insert_all([{ username: 'ar_i1' }, { username: 'taken' }]) })
out('insert_all_kept', User.where(username: 'ar_i1').count)

# Deferred: the error comes at COMMIT, out of the transaction block.
out('deferred', error_of { Key.transaction { Key.create!(fingerprint: 'ktaken') } })

# 55P03: a value under another cell's open transaction's lease.
out('held', error_of { User.create!(username: 'ar_held') })
# 55000: a database cloned from a cell refuses to claim.
out('copy', error_of { CopyUser.create!(username: 'ar_copy') })
