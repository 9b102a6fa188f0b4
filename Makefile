# moonkv build. `make` builds everything, `make test` runs every suite twice
# (plain and under ASan+UBSan) and the threaded parts' tests under TSan,
# `make run` starts standalone in the foreground.

CC      ?= cc
SAN     ?= 0
PREFIX  ?= /usr/local
VERSION := 0.1.0

# The sanitizer builds carry -g1: line tables and functions, inlined ones
# included, which is all a sanitizer report prints; no local variables or
# types for a debugger (use build/rel's -g). It cuts the SAN build's
# compiles by about a fifth (test_gateway.c and 7 others: 6.1 to 4.9 CPU-s;
# TSan 3.9 to 3.5), which make test pays on every fresh checkout.
ifeq ($(SAN),1)
BUILD    := build/san
OPTFLAGS := -O1 -g1 -fsanitize=address,undefined -fno-omit-frame-pointer \
            -fno-sanitize-recover=undefined
else ifeq ($(SAN),thread)
# gcc's -O1 with TSan sees "maybe uninitialized" out-parameters that the
# plain and ASan builds do not (backend/engine.c locate()): not an error here.
BUILD    := build/tsan
OPTFLAGS := -O1 -g1 -fsanitize=thread -fno-omit-frame-pointer -Wno-maybe-uninitialized
else
BUILD    := build/rel
OPTFLAGS := -O2 -g
endif

WARN     := -Wall -Wextra -Werror -Wno-unused-parameter
CPPFLAGS += -D_GNU_SOURCE -DMOONKV_VERSION=\"$(VERSION)\" -I. -Isrc
CFLAGS   += -std=gnu11 -fPIC -pthread $(WARN) $(OPTFLAGS) -MMD -MP
LDFLAGS  += -pthread $(if $(filter 1,$(SAN)),-fsanitize=address$(,)undefined) \
            $(if $(filter thread,$(SAN)),-fsanitize=thread)
LDLIBS   := -lev -lhiredis -lcjson -libverbs -lrdmacm -lm
# The node's disk tier (src/node/disk_io.c): the server and the tests link
# it, libmoonkv does not.
SRV_LDLIBS := $(LDLIBS) -luring
,        := ,

# Every module directory feeds one internal archive; binaries link it.
# src/main (main and role dispatch, above every role) goes only into the
# server binary.
MOD_SRCS := $(wildcard resp/*.c src/core/*.c src/server/*.c src/master/*.c \
              src/node/*.c src/gateway/*.c src/standalone/*.c backend/*.c rdma/*.c \
              src/proto/*.c src/link/*.c src/etcd/*.c src/transports/*.c src/client/*.c)
MOD_OBJS := $(MOD_SRCS:%.c=$(BUILD)/%.o)
MAIN_SRCS := $(wildcard src/main/*.c)
MAIN_OBJS := $(MAIN_SRCS:%.c=$(BUILD)/%.o)
CLI_SRCS := $(wildcard src/client/*.c src/proto/*.c src/link/*.c src/etcd/*.c resp/*.c src/core/*.c backend/*.c rdma/*.c \
              src/transports/*.c)
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/%.o)
SUP_SRCS := $(wildcard tests/support/*.c)
SUP_OBJS := $(SUP_SRCS:%.c=$(BUILD)/%.o)
UNIT_SRCS := $(wildcard tests/unit/test_*.c)
INTG_SRCS := $(wildcard tests/integration/test_*.c)
BENCH_SRCS := $(wildcard tests/bench/*.c)
TEST_BINS := $(UNIT_SRCS:%.c=$(BUILD)/%) $(INTG_SRCS:%.c=$(BUILD)/%)
BENCH_BINS := $(BENCH_SRCS:%.c=$(BUILD)/%)
# Simulators the tests and benchmarks drive (tests/sim: many nodes in one process).
SIM_SRCS := $(wildcard tests/sim/*.c)
SIM_BINS := $(SIM_SRCS:%.c=$(BUILD)/%)

# The threaded parts, run under ThreadSanitizer by `make test` (SAN=thread
# builds only these and the server they start). test_tcp_transport is left
# out: its killed-server case assumes the transfers outlast the stop, which
# TSan's slowdown breaks (2 of 5 runs); the engine and node tests drive the
# same TCP threads.
TSAN_TESTS := tests/unit/test_engine tests/unit/test_disk_store tests/unit/test_workpool tests/unit/test_jobqueue tests/unit/test_leader_watch \
              tests/unit/test_shm_transport tests/unit/test_shm_warm tests/unit/test_staging tests/integration/test_node \
              tests/integration/test_gateway tests/integration/test_gateway_io_threads \
              tests/integration/test_client_threads tests/integration/test_groups \
              tests/integration/test_groups_shared

SERVER  := $(BUILD)/moonkv-server
LIBA    := $(BUILD)/libmoonkv.a
LIBSO   := $(BUILD)/libmoonkv.so
INTERNAL := $(BUILD)/libmoonkv-internal.a

.PHONY: all tests test-bins tsan run test deps clean install bench fuzz fuzz-build python soak chaos install-mooncake-shim
all: $(SERVER) $(LIBA) $(LIBSO) tests

tests: $(TEST_BINS) $(BENCH_BINS) $(SIM_BINS)

# What tests/run.sh runs of a build and the simulators its tests drive (the
# SAN build needs no bench binaries).
test-bins: $(SERVER) $(LIBA) $(TEST_BINS) $(SIM_BINS)

tsan: $(SERVER) $(TSAN_TESTS:%=$(BUILD)/%)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(INTERNAL): $(MOD_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(LIBA): $(CLI_OBJS)
	rm -f $@ && ar rcs $@ $^

$(LIBSO): $(CLI_OBJS)
	$(CC) -shared -Wl,-soname,libmoonkv.so.0 $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(SERVER): $(MAIN_OBJS) $(INTERNAL)
	$(CC) $(LDFLAGS) -o $@ $^ $(SRV_LDLIBS)

# Kept, not deleted as intermediates: a later make would rebuild them and
# relink every test binary (CI's `make all` then `make test` did, ~1 min).
.SECONDARY: $(SUP_OBJS)
$(BUILD)/tests/%: tests/%.c $(INTERNAL) $(SUP_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Itests -o $@ $< $(SUP_OBJS) $(INTERNAL) $(LDFLAGS) $(SRV_LDLIBS)

deps:
	@scripts/deps.sh

# ---- Fuzzing (libFuzzer, clang only here; everything else stays $(CC)) ----
# Each harness links only the module objects it names, built again with
# clang under ASan+UBSan into build/fuzz. `make fuzz` runs every harness
# for FUZZ_SECONDS over tests/fuzz/corpus/<name>/, keeping what it finds;
# `make test` runs each over its corpus plus its share of FUZZ_TEST_BUDGET
# (60) seconds of fresh inputs for all harnesses together (tests/fuzz/run.sh),
# without touching the committed corpus.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_DIR     := build/fuzz
FUZZ_SAN     := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS  := -std=gnu11 -pthread -g -O1 -fno-omit-frame-pointer $(WARN) $(FUZZ_SAN)
FUZZ_NAMES   := resp wire cap auth config client_decode node_task rebuild placed notes located ended replies
# per-slice CRCs (proto/slices) combine with crc32c, which may spread over the workpool
FUZZ_SLICES             := src/proto/slices src/core/crc32c src/core/crc32c_fold src/core/workpool src/core/jobqueue
FUZZ_MODS_resp          := resp/resp_parser
FUZZ_MODS_wire          := backend/wire
FUZZ_MODS_cap           := backend/cap src/core/siphash
FUZZ_MODS_auth          := backend/auth backend/netio src/core/anet src/core/siphash src/core/util src/core/log
FUZZ_MODS_config        := src/server/config src/core/log src/core/util
FUZZ_MODS_client_decode := src/client/placement src/client/errors src/proto/extents src/core/objtable src/proto/replicas src/proto/placed src/proto/status \
                           src/proto/reply_bound resp/resp_writer backend/cap src/core/siphash src/core/util src/core/log \
                           $(FUZZ_SLICES)
FUZZ_MODS_placed        := src/proto/placed src/proto/extents src/core/objtable resp/resp_writer backend/cap src/core/siphash src/core/util src/core/log
FUZZ_MODS_notes         := src/proto/notes resp/resp_writer src/core/util src/core/log $(FUZZ_SLICES)
FUZZ_MODS_ended         := src/proto/ended src/proto/placed src/proto/extents src/core/objtable resp/resp_writer backend/cap \
                           src/core/siphash src/core/util src/core/log
FUZZ_MODS_located       := src/proto/located src/proto/placed src/proto/extents src/core/objtable resp/resp_writer backend/cap \
                           src/core/siphash src/core/util src/core/log $(FUZZ_SLICES)
FUZZ_MODS_replies       := src/proto/replies src/proto/reply_bound src/proto/replicas src/proto/placed src/proto/extents src/core/objtable \
                           resp/resp_writer backend/cap src/core/siphash src/core/util src/core/log $(FUZZ_SLICES)
FUZZ_MODS_node_task     := src/node/task src/proto/task src/proto/extents src/core/objtable src/proto/reply_bound resp/resp_writer backend/cap \
                           src/core/siphash src/core/util src/core/log
FUZZ_MODS_rebuild       := src/master/meta src/master/lifecycle src/master/placement src/master/quarantine src/master/holdings \
                           src/master/membership src/master/rebuild src/master/repair src/master/offload src/master/restore src/master/otable \
                           src/master/collect src/master/shares src/proto/chunks src/core/pinset src/core/evict src/core/heap_huge \
                           src/core/objtable src/core/alloc src/core/util src/core/log \
                           src/core/siphash backend/cap src/proto/report src/proto/notes resp/resp_writer $(FUZZ_SLICES)
FUZZ_BINS := $(FUZZ_NAMES:%=$(FUZZ_DIR)/fuzz_%)

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

define fuzz_harness
$(FUZZ_DIR)/fuzz_$(1): $(FUZZ_DIR)/obj/tests/fuzz/fuzz_$(1).o $(FUZZ_MODS_$(1):%=$(FUZZ_DIR)/obj/%.o)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $$@ $$^ -lhiredis -lcjson -lm
endef
$(foreach n,$(FUZZ_NAMES),$(eval $(call fuzz_harness,$(n))))

fuzz-build: $(FUZZ_BINS)

fuzz: deps fuzz-build
	@for n in $(FUZZ_NAMES); do \
	  mkdir -p tests/fuzz/corpus/$$n; \
	  $(FUZZ_DIR)/fuzz_$$n -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=1024 \
	    -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/crash-$$n- tests/fuzz/corpus/$$n \
	    >$(FUZZ_DIR)/$$n.log 2>&1; rc=$$?; \
	  echo "fuzz_$$n: $$(sed -n 's/^stat::number_of_executed_units: *//p' $(FUZZ_DIR)/$$n.log) runs in $(FUZZ_SECONDS) s, corpus $$(ls tests/fuzz/corpus/$$n | wc -l)"; \
	  if [ $$rc -ne 0 ]; then grep -E 'ERROR|SUMMARY' $(FUZZ_DIR)/$$n.log; exit 1; fi; \
	done

# The Python binding (python/), built against this build's libmoonkv.a
# into $(BUILD)/python: PYTHONPATH=$(BUILD)/python python3 -c 'import moonkv'.
# Debian's interpreter, whatever python3 comes first on PATH. The SAN
# build's extension runs only with libasan preloaded (see tests/run.sh).
PYTHON  ?= /usr/bin/python3
PY_SAN  := -fsanitize=address,undefined -fno-sanitize-recover=undefined
python: $(LIBA)
	cd python && MOONKV_BUILD=$(abspath $(BUILD)) $(if $(filter 1,$(SAN)),CFLAGS="$(PY_SAN) -fno-omit-frame-pointer" \
	    LDFLAGS="$(PY_SAN)") $(PYTHON) setup.py -q build \
	    --build-base $(abspath $(BUILD))/python-build --build-lib $(abspath $(BUILD))/python
	rm -rf $(BUILD)/mooncake-shim && mkdir -p $(BUILD)/mooncake-shim && cp -r python/mooncake-shim/mooncake $(BUILD)/mooncake-shim/

# The Mooncake-compatible shim (`from mooncake.store import ...` on moonkv)
# shadows a real Mooncake, so only this target installs it, never install.
install-mooncake-shim: python
	install -d $(DESTDIR)$(PYTHON_SITE)/mooncake
	install -m 644 $(BUILD)/mooncake-shim/mooncake/*.py $(DESTDIR)$(PYTHON_SITE)/mooncake/

run: deps
	@$(MAKE) --no-print-directory $(SERVER)
	$(SERVER) --config conf/standalone.json

# The plain build, the same under ASan+UBSan, the threaded parts under
# TSan and the fuzz harnesses. `make test` leaves them to run.sh --build:
# it builds them one after another (rel, tsan, san, fuzz; make -j of the
# core count each) as jobs of its pool and starts a build's tests as soon
# as that build is done, beside the next build (docs/TESTS.md), prints the
# final "N passed, N failed" line and fails on any failure.
# `make test-builds` builds all four as one make sharing TEST_BUILD_JOBS.
TEST_BUILD_JOBS ?= $(shell nproc)
TEST_BUILDS := test-build-rel test-build-san test-build-tsan test-build-fuzz
.PHONY: test-builds $(TEST_BUILDS)
test-builds: $(TEST_BUILDS)
test-build-rel:
	+@$(MAKE) --no-print-directory all python
test-build-san:
	+@$(MAKE) --no-print-directory SAN=1 test-bins python
test-build-tsan:
	+@$(MAKE) --no-print-directory SAN=thread tsan
test-build-fuzz:
	+@$(MAKE) --no-print-directory fuzz-build

test: deps
	@tests/run.sh --build build/rel build/tsan build/san

# Not in CI: SOAK_CYCLES put/get/remove cycles, CSV and plot under
# tests/soak/results/; CHAOS_SECONDS of the chaos test with large values.
SOAK_CYCLES   ?= 10000000
CHAOS_SECONDS ?= 600

soak: deps
	@$(MAKE) --no-print-directory all $(BUILD)/tests/soak/soak
	@tests/soak/run.sh $(BUILD) $(SOAK_CYCLES)

chaos: deps
	@$(MAKE) --no-print-directory all
	MKV_CHAOS_SECONDS=$(CHAOS_SECONDS) MKV_CHAOS_BIG=1 MOONKV_SERVER=$(BUILD)/moonkv-server \
	    $(BUILD)/tests/integration/test_chaos

bench: deps
	@$(MAKE) --no-print-directory all python
	@tests/bench/run.sh build/rel

# Configs go to /etc/moonkv for PREFIX=/usr, else PREFIX/etc/moonkv, and
# never over a file already there (the samples are also in share/moonkv).
SYSCONFDIR ?= $(if $(filter /usr,$(PREFIX)),/etc,$(PREFIX)/etc)
UNITDIR    ?= $(PREFIX)/lib/systemd/system
PYTHON_SITE ?= $(if $(filter /usr,$(PREFIX)),/usr/lib/python3/dist-packages,$(PREFIX)/lib/python$(shell \
               $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')/dist-packages)

install: $(SERVER) $(LIBA) $(LIBSO) python
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 755 $(SERVER) $(DESTDIR)$(PREFIX)/bin/
	install -m 644 $(LIBA) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(LIBSO) $(DESTDIR)$(PREFIX)/lib/libmoonkv.so.0
	ln -sf libmoonkv.so.0 $(DESTDIR)$(PREFIX)/lib/libmoonkv.so
	install -m 644 src/client/moonkv.h src/client/moonkv_async.h $(DESTDIR)$(PREFIX)/include/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' src/client/moonkv.pc.in \
	    > $(DESTDIR)$(PREFIX)/lib/pkgconfig/moonkv.pc
	install -d $(DESTDIR)$(PYTHON_SITE)/moonkv
	install -m 644 $(BUILD)/python/moonkv/__init__.py $(DESTDIR)$(PYTHON_SITE)/moonkv/
	install -m 755 $(BUILD)/python/moonkv/_moonkv*.so $(DESTDIR)$(PYTHON_SITE)/moonkv/
	install -d $(DESTDIR)$(PYTHON_SITE)/moonkv/integrations
	install -m 644 $(BUILD)/python/moonkv/integrations/*.py $(DESTDIR)$(PYTHON_SITE)/moonkv/integrations/
	install -d $(DESTDIR)$(PREFIX)/share/moonkv/conf $(DESTDIR)$(SYSCONFDIR)/moonkv $(DESTDIR)$(UNITDIR)
	install -m 644 conf/*.json $(DESTDIR)$(PREFIX)/share/moonkv/conf/
	for f in conf/*.json; do t=$(DESTDIR)$(SYSCONFDIR)/moonkv/$${f#conf/}; \
	    [ -e "$$t" ] || install -m 644 "$$f" "$$t"; done
	sed -e 's|/usr/bin/|$(PREFIX)/bin/|g' -e 's|/etc/moonkv/|$(SYSCONFDIR)/moonkv/|g' \
	    conf/systemd/moonkv@.service > $(DESTDIR)$(UNITDIR)/moonkv@.service

clean:
	rm -rf build

-include $(shell find build -name '*.d' 2>/dev/null)
