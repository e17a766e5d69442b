# PGXS build of the two extensions: the store (claims, here) and the cell
# side (claims_cell, cell/). `make && make install` builds and installs both
# for the server whose pg_config is found (PG_CONFIG). The gRPC front is
# `make grpc`; `make run`, `make test`, `make deb` and `make bench` build
# what they need themselves and choose their own server (scripts/).
EXTENSION = claims
EXTVERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(EXTENSION).control)

MODULE_big = claims
# common/: the code both extensions build (time-ordered uuids, the
# background workers' database lookup, malloc thresholds); each library
# has its own copy.
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c common/*.c)))
PG_CPPFLAGS = -Icommon
# SHA-256 of bucket values (OpenSSL comes with PostgreSQL's development packages)
SHLIB_LINK = -lcrypto
# The extension's scripts are built from their templates in src/sql, where
# each function's definitions live in src/sql/udfs/NAME/ (NAME.TYPES for each
# form of an overloaded name), latest.sql the current one (scripts/build_sql.sh).
SQL_TEMPLATES = $(sort $(wildcard src/sql/$(EXTENSION)--*.sql))
DATA_built = $(patsubst src/sql/%,build/sql/%,$(SQL_TEMPLATES))
PGFILEDESC = "claims - lease-first global claims store"

# pg_regress: sql/*.sql against expected/*.out, on a private server.
# scripts/test.sh runs this suite and ISOLATION as installcheck defines them.
REGRESS = $(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql)))
REGRESS_OPTS = --temp-instance=./tmp_check --temp-config=test/claims.conf

# Isolation specs: test/isolation/specs/*.spec against test/isolation/expected.
ISOLATION = $(patsubst test/isolation/specs/%.spec,%,$(sort $(wildcard test/isolation/specs/*.spec)))
ISOLATION_OPTS = --temp-instance=./tmp_check_iso --temp-config=test/claims.conf --inputdir=test/isolation

# TAP tests (PostgreSQL::Test::Cluster).
TAP_TESTS = 1
PROVE_TESTS = $(sort $(wildcard test/t/*.pl))

PG_CFLAGS += -Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare -Wno-missing-field-initializers

# Any server's pg_config: the first on PATH, or make PG_CONFIG=/path/to/pg_config.
PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)
# The project's own commands (make run, test, deb, bench, stop) install
# what they need first, PostgreSQL's development files included.
SCRIPT_GOALS = run stop test fuzz deb bench grpc install-grpc clean-grpc
ifneq ($(wildcard $(PGXS)),)
include $(PGXS)
else ifneq ($(filter-out $(SCRIPT_GOALS),$(or $(MAKECMDGOALS),all)),)
$(error $(PG_CONFIG) --pgxs names no PGXS build files: install your PostgreSQL's development package (postgresql-server-dev-NN on Debian) or run make PG_CONFIG=/path/to/pg_config)
endif

# Every source includes the shared header.
$(OBJS): src/claims.h $(wildcard common/*.h)

build/sql/%.sql: src/sql/%.sql $(wildcard src/sql/udfs/*/*.sql) scripts/build_sql.sh
	scripts/build_sql.sh $< $@

# The cell side, claims_cell, is built, installed and cleaned with the store.
all: all-cell
install: install-cell
clean: clean-cell
.PHONY: all-cell install-cell clean-cell
all-cell:
	$(MAKE) -C cell PG_CONFIG=$(PG_CONFIG)
install-cell:
	$(MAKE) -C cell PG_CONFIG=$(PG_CONFIG) install
clean-cell:
	$(MAKE) -C cell PG_CONFIG=$(PG_CONFIG) clean

# The gRPC server, claims-grpc (grpc/), needs gRPC's C++ toolchain and is
# built apart: `make grpc`, `make install-grpc`. It goes to the bin
# directory beside PostgreSQL's prefix: /usr/bin for Debian's
# /usr/lib/postgresql/NN/bin (GRPC_BINDIR overrides). `make clean` cleans it
# too (that needs no toolchain).
GRPC_BINDIR ?= $(shell $(PG_CONFIG) --bindir | sed 's,/lib/postgresql/[0-9]*/bin$$,/bin,')
clean: clean-grpc
.PHONY: grpc install-grpc clean-grpc
grpc:
	$(MAKE) -C grpc
install-grpc: grpc
	$(MAKE) -C grpc install BINDIR=$(GRPC_BINDIR)
clean-grpc:
	$(MAKE) -C grpc clean

# META.json (PGXN) from META.json.in and the control files' versions.
META.json: META.json.in claims.control cell/claims_cell.control scripts/meta_json.sh
	scripts/meta_json.sh

.PHONY: test fuzz run stop bench deb
# make test: PostgreSQL 15, this machine's. make test PG=17: PostgreSQL 17 in
# a Debian 13 root (scripts/test_pg17.sh). make test PG=15-cassert: the cell
# suites and the store's churn tests on PostgreSQL 15 built with assertions
# (scripts/test_cassert.sh, the server built once per machine under
# /var/cache/claims).
# make test LOAD=N: the same with N CPU-bound processes beside the whole
# run (scripts/with_load.sh), to show the suites hold on a loaded machine.
PG ?=
LOAD ?=
WITH_LOAD = $(if $(LOAD),scripts/with_load.sh $(LOAD))
test:
ifeq ($(PG),17)
	$(WITH_LOAD) scripts/test_pg17.sh
else ifeq ($(PG),15-cassert)
	$(WITH_LOAD) scripts/test_cassert.sh
else ifeq ($(filter-out 15,$(PG)),)
	$(WITH_LOAD) scripts/test.sh
else
	@echo "make test: PG=$(PG) is not supported (15, the default, 15-cassert or 17)"; echo "0 passed, 1 failed"; exit 1
endif
# make fuzz SECONDS=N: the cell's randomized invariant test
# (cell/test/t/066_random_invariants.pl) alone for N seconds (default 600),
# as make test runs it (PostgreSQL 15); CLAIMS_SEED=S replays a seed.
SECONDS ?= 600
fuzz:
	CLAIMS_SUITES=cell-tap CLAIMS_CELL_TAP_FILES=066_random_invariants CLAIMS_FUZZ_SECONDS=$(SECONDS) \
	  CLAIMS_SUITE_TIMEOUT=$$(( $(SECONDS) + 900 )) $(WITH_LOAD) scripts/test.sh
# make deb: postgresql-15-claims in build/deb/; make deb PG=17:
# postgresql-17-claims, built in the Debian 13 root of make test PG=17.
deb:
ifeq ($(PG),17)
	CLAIMS_PG17_RUN=deb scripts/test_pg17.sh
else
	scripts/deb.sh
endif
run:
	scripts/run.sh
stop:
	scripts/stop.sh
# make bench PG=17: the benchmark against PostgreSQL 17 in the Debian 13 root.
bench:
ifeq ($(PG),17)
	CLAIMS_PG17_RUN=bench scripts/test_pg17.sh
else
	bench/run.sh
endif
